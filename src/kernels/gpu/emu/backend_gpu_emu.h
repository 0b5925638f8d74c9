// The gpu-emu backend: an emulated GPU that host code treats as it would a
// real one. The GPU backends' kernels (kernels/gpu/ops_launch.h, the kernel
// dialect) run on the SIMT emulator (emulator.h), queued on an in-order
// compute stream that runs on a worker thread (stream.h): an op returns
// before it runs, host reads go through copies that wait, events record and
// wait as CUDA's do. Its memory is device memory (DeviceAddressing::Kind::
// device): a host read or write through a device pointer faults, and no MPI
// call may take one, so its collectives go through a device communicator
// (comm/device_comm.h: staged through host memory). GEMMs are host GEMMs
// computed as cuBLASLt computes them (fp32; bf16 inputs with fp32
// accumulation), queued on the stream like the kernels.
//
// train.backend = "gpu-emu" trains on it (slowly: every GPU thread is a fiber).
#pragma once

#include <cstdint>
#include <memory>

#include "core/status.h"
#include "kernels/backend.h"
#include "kernels/gpu/emu/stream.h"

namespace tera {

struct GpuEmuOptions {
  int warp = 32;            // 32 (NVIDIA) or 64 (AMD's gfx90a)
  int64_t memory = -1;      // bytes of device memory; -1: as much as the host gives
  int visible_gpus = 0;     // GPUs each process sees; 0: one per rank of the node
  gpu::emu::Stream::Mode mode = gpu::emu::Stream::Mode::lazy;
  bool tile_gemms = false;  // the linear layers on the dialect's GEMM kernels, not host GEMMs
};

// The options from the environment, each unset variable at its default:
//   TERA_GPU_EMU_WARP    32 or 64
//   TERA_GPU_EMU_MEMORY  device memory in bytes, suffix K, M, G or T (powers of 1024)
//   TERA_GPU_EMU_GPUS    GPUs visible to each process (1 to 1024)
//   TERA_GPU_EMU_STREAM  lazy or eager (stream.h)
//   TERA_GPU_EMU_GEMM    host (GEMMs as cuBLASLt computes them) or tiles (the dialect's GEMM kernels)
// A malformed value is an error naming the variable and what it takes.
Expected<GpuEmuOptions> gpu_emu_options_from_env();

std::unique_ptr<Backend> make_gpu_emu_backend(const GpuEmuOptions& options);

// Launches of the kernel of that name (TERA_LAUNCH's spelling) on this
// gpu-emu instance so far: lets tests see which of two kernels an op chose.
int64_t gpu_emu_launches(const Backend& be, const char* kernel);
// The instance's compute stream, for tests that launch kernels of their own.
gpu::emu::Stream& gpu_emu_compute_stream(const Backend& be);

}  // namespace tera
