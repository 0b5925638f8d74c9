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

void check(hipError_t e, const char* what) {
  if (e != hipSuccess) {
    std::fprintf(stderr, "tera: hip: %s: %s\n", what, hipGetErrorString(e));
    std::abort();
  }
}

}  // namespace

TERA_GPU_BEGIN

// What the launches need: a stream, scratch memory, launch checks.
class HipContext final : public DeviceContext {
 public:
  void* scratch(int64_t bytes) override {
    if (bytes > scratch_bytes_) {
      if (scratch_ != nullptr) {
        check(hipStreamSynchronize(stream), "hipStreamSynchronize");
        check(hipFree(scratch_), "hipFree");
      }
      check(hipMalloc(&scratch_, static_cast<size_t>(bytes)), "hipMalloc (scratch)");
      scratch_bytes_ = bytes;
    }
    return scratch_;
  }
  void launched(const char* kernel) override {
    if (const hipError_t e = hipGetLastError(); e != hipSuccess) {
      std::fprintf(stderr, "tera: hip: launch of %s: %s\n", kernel, hipGetErrorString(e));
      std::abort();
    }
  }

 private:
  void* scratch_ = nullptr;
  int64_t scratch_bytes_ = 0;
};

TERA_GPU_END

namespace tera {

// The dialect ops in a partial backend table (no GEMMs, no memory ops): what
// the HIP backend will be built from.
BackendOps hip_kernel_ops() {
  BackendOps b;
  gpu::launch::set_dialect_ops(b);
  return b;
}

}  // namespace tera
