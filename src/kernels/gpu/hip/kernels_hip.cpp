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

#include "kernels/backend.h"
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
  b.layernorm_forward = gpu::launch::layernorm_forward;
  b.layernorm_backward = gpu::launch::layernorm_backward;
  b.rmsnorm_forward = gpu::launch::rmsnorm_forward;
  b.rmsnorm_backward = gpu::launch::rmsnorm_backward;
  b.gelu_forward = gpu::launch::gelu_forward;
  b.gelu_backward = gpu::launch::gelu_backward;
  b.swiglu_forward = gpu::launch::swiglu_forward;
  b.swiglu_backward = gpu::launch::swiglu_backward;
  b.rope_forward = gpu::launch::rope_forward;
  b.rope_backward = gpu::launch::rope_backward;
  b.attention_forward = gpu::launch::attention_forward;
  b.attention_backward = gpu::launch::attention_backward;
  b.flash_attention_forward = gpu::launch::flash_attention_forward;
  b.flash_attention_backward = gpu::launch::flash_attention_backward;
  b.residual_forward = gpu::launch::residual_forward;
  b.cross_entropy = gpu::launch::cross_entropy;
  b.softmax_row = gpu::launch::softmax_row;
  b.embedding_lookup = gpu::launch::embedding_lookup;
  b.embedding_lookup_backward = gpu::launch::embedding_lookup_backward;
  b.position_add = gpu::launch::position_add;
  b.position_add_backward = gpu::launch::position_add_backward;
  b.bias_residual = gpu::launch::bias_residual;
  b.ce_max = gpu::launch::ce_max;
  b.ce_exp_sum = gpu::launch::ce_exp_sum;
  b.ce_finalize = gpu::launch::ce_finalize;
  b.accumulate_sum = gpu::launch::accumulate_sum;
  b.sum_squares = gpu::launch::sum_squares;
  b.count_nonfinite = gpu::launch::count_nonfinite;
  b.adamw = gpu::launch::adamw;
  b.tile_gemm_bf16 = gpu::launch::tile_gemm_bf16;
  return b;
}

}  // namespace tera
