// The gpu-emu backend: the GPU backends' kernels (kernels/gpu/ops_launch.h,
// the kernel dialect) run on the SIMT emulator (emulator.h), over device
// memory that host code cannot touch. GEMMs are host GEMMs computed as
// cuBLASLt computes them: fp32 for the fp32 linear ops, bf16-rounded inputs
// with fp32 accumulation for the bf16 ones.
//
// train.backend = "gpu-emu" trains on it (slowly: every GPU thread is a
// fiber); TERA_GPU_EMU_WARP=64 runs the kernels at AMD's warp width.
#pragma once

#include "kernels/backend.h"

namespace tera {

// The table; the warp width the emulator gives kernels is gpu::emu::
// set_warp_size's (32 unless set, or TERA_GPU_EMU_WARP=64 at first use).
const Backend& gpu_emu_backend();

}  // namespace tera
