// The cuda backend: CUDA device memory, a compute and a comm stream,
// cuBLASLt GEMMs (fp32; bf16 inputs with fp32 accumulation) and the kernel
// dialect's kernels (kernels/gpu/ops_launch.h) compiled by nvcc for sm_90
// and sm_80. Every launch is checked; TERA_DEVICE_SYNC=1 also waits for
// each kernel and GEMM, so an error names the one that failed.
//
// Its table is complete and train.backend = "cuda" offers it where built;
// it has never run on a GPU. scripts/device-check runs its conformance
// checks, benchmarks and a training run on a GPU node.
#pragma once

#include <memory>
#include <string>

#include "kernels/backend.h"

namespace tera {

// A new instance; its streams, cuBLASLt handle and workspace are made on
// the current device at first use (after bind_device).
std::unique_ptr<Backend> make_cuda_backend();
// "" when a CUDA device is usable, else why not in the driver's words.
std::string cuda_device_status();
// The current device's name, compute capability and SM count.
std::string cuda_device_name();

}  // namespace tera
