// The gpu-emu backend: the GPU backends' kernels (kernels/gpu/ops_launch.h,
// the kernel dialect) run on the SIMT emulator (emulator.h), over device
// memory that host code cannot touch. GEMMs are host GEMMs computed as
// cuBLASLt computes them: fp32 for the fp32 linear ops, bf16-rounded inputs
// with fp32 accumulation for the bf16 ones.
//
// Not yet complete: the ops not yet written in the dialect are null in its
// table (missing_required_ops names them), so it is not offered to
// train.backend; the kernel conformance suite runs it op by op.
#pragma once

#include "kernels/backend.h"

namespace tera {

// The table; the warp width the emulator gives kernels is gpu::emu::
// set_warp_size's (32 unless set).
const Backend& gpu_emu_backend();

}  // namespace tera
