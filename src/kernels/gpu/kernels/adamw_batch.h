// How many tensors one multi-tensor AdamW launch takes (adamw.cuh): its
// table travels as the kernel's argument, and 48 entries keep it under the
// portable 4 KB limit of a kernel's arguments. Apart from the kernels so
// that host code (tests counting launches) can read it.
#pragma once

namespace tera::gpu {

constexpr int kAdamWBatch = 48;

}  // namespace tera::gpu
