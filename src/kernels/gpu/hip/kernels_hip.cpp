// The HIP compile of the kernel dialect (scripts/build hip, CI): every kernel
// of kernels/gpu/ops_launch.h and its launch, compiled by Debian 12's hipcc
// 5.2 for gfx90a (MI250X, wave64) with warnings as errors. Debian 12 has no
// hipBLAS or RCCL, so this is the kernels and their launches only: the
// entries below are the ops a HIP backend would take from this file (GEMMs
// and the device communicator would come from hipBLASLt and RCCL). Compiled,
// never run: no AMD GPU has been at hand.
#include <hip/hip_runtime.h>

#include <cstdio>
#include <cstdlib>

#include "kernels/gpu/ops_launch.h"

namespace {

hipStream_t g_stream = nullptr;
void* g_scratch = nullptr;
int64_t g_scratch_bytes = 0;

void check(hipError_t e, const char* what) {
  if (e != hipSuccess) {
    std::fprintf(stderr, "tera: hip: %s: %s\n", what, hipGetErrorString(e));
    std::abort();
  }
}

}  // namespace

TERA_GPU_BEGIN

Stream current_stream() { return g_stream; }

void* scratch(int64_t bytes) {
  if (bytes > g_scratch_bytes) {
    if (g_scratch != nullptr) {
      check(hipStreamSynchronize(g_stream), "hipStreamSynchronize");
      check(hipFree(g_scratch), "hipFree");
    }
    check(hipMalloc(&g_scratch, static_cast<size_t>(bytes)), "hipMalloc (scratch)");
    g_scratch_bytes = bytes;
  }
  return g_scratch;
}

TERA_GPU_END

namespace tera {

// The dialect ops in a partial backend table (no GEMMs, no memory ops): what
// the HIP backend will be built from.
Backend hip_kernel_ops() {
  Backend b;
  b.name = "hip (kernels only)";
  gpu::launch::set_dialect_ops(b);
  return b;
}

}  // namespace tera
