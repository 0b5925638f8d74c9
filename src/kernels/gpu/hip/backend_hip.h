// The hip backend: AMD GPUs through the HIP runtime, from the same sources
// as cuda: the runtime backends' shared device state (kernels/gpu/runtime/
// runtime_context.h: memory, streams, events, pinned staging, the caching
// allocator, the device binding), the dialect's kernels (ops_launch.h,
// compiled by hipcc for gfx90a: the tile primitive on the MFMA matrix
// instruction), and the linear layers on the dialect's GEMM kernels
// (gemm.cuh) where no vendor GEMM library was found at build time (Debian 12
// has neither hipBLASLt nor rocBLAS). Its device communicators: RCCL where
// found (none in Debian 12), else GPU-aware MPI where the MPI library takes
// HIP pointers, else staged (comm/device_comm.h).
//
// Built and linked where hipcc and the HIP runtime are (CI); it has never
// run on an AMD GPU. gpu-emu at warp 64 with TERA_GPU_EMU_GEMM=tiles runs
// the same kernels in CI.
#pragma once

#include <memory>
#include <string>

#include "kernels/backend.h"

namespace tera {

std::unique_ptr<Backend> make_hip_backend();
// "" when an AMD GPU is usable, else why not in the HIP runtime's words.
std::string hip_device_status();
// The current device's name, architecture and compute-unit count.
std::string hip_device_name();

}  // namespace tera
