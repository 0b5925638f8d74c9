// The cuda backend: CUDA device memory, one compute stream, cuBLASLt GEMMs
// (fp32; bf16 inputs with fp32 accumulation) and the kernel dialect's kernels
// (kernels/gpu/ops_launch.h) compiled by nvcc for sm_90 and sm_80.
//
// Its table is complete and train.backend = "cuda" offers it where built;
// it has never run on a GPU. scripts/device-check runs its conformance
// checks and benchmarks on a GPU node.
#pragma once

#include <string>

#include "kernels/backend.h"

namespace tera {

const Backend& cuda_backend();
// "" when a CUDA device is usable, else why not in the driver's words.
std::string cuda_device_status();
// The first device's name, compute capability and SM count.
std::string cuda_device_name();

}  // namespace tera
