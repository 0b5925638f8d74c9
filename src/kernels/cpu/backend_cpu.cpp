// The CPU backend table: fp32 instantiations of the kernels in cpu_ops.h,
// over device memory that is plain host memory (memory.cpp). It keeps no
// state (its entries get a null context), so one instance serves the process.
#include <string>

#include "kernels/backend.h"
#include "kernels/cpu/cpu_ops.h"
#include "kernels/cpu/tile_mac.h"

namespace tera {

namespace {
// What multiplies bf16 on this CPU: the linear layers' GEMMs and the flash
// attention's tile products, in words, for tera train's start-up line.
std::string cpu_bf16_paths(BackendContext*) {
  return std::string(cpu::gemm_bf16_path()) + "; flash attention tiles by " + cpu::tile_mac_bf16_path();
}

bool cpu_supports(BackendContext*, KernelOp op, DType dtype) {
  // The ops train.precision = "bf16" calls work in bf16; the rest in fp32.
  return dtype == DType::bf16 ? kernel_op_need(op) == OpNeed::bf16 : dtype == DType::f32;
}

BackendOps cpu_ops() {
  return BackendOps{
      .alloc = stateless<cpu::alloc>,
      .release = stateless<cpu::release>,
      .fill = stateless<cpu::fill>,
      .copy = stateless<cpu::copy>,
      .gemm = stateless<cpu::gemm<float>>,
      .linear_forward = stateless<cpu::linear_forward<float>>,
      .linear_backward = stateless<cpu::linear_backward<float>>,
      .linear_forward_bf16 = stateless<cpu::linear_forward_bf16>,
      .linear_backward_bf16 = stateless<cpu::linear_backward_bf16>,
      .layernorm_forward = stateless<cpu::layernorm_forward<float>>,
      .layernorm_backward = stateless<cpu::layernorm_backward<float>>,
      .rmsnorm_forward = stateless<cpu::rmsnorm_forward<float>>,
      .rmsnorm_backward = stateless<cpu::rmsnorm_backward<float>>,
      .gelu_forward = stateless<cpu::gelu_forward<float>>,
      .gelu_backward = stateless<cpu::gelu_backward<float>>,
      .swiglu_forward = stateless<cpu::swiglu_forward<float>>,
      .swiglu_backward = stateless<cpu::swiglu_backward<float>>,
      .layernorm_forward_bf16 = stateless<cpu::layernorm_forward_bf16>,
      .rmsnorm_forward_bf16 = stateless<cpu::rmsnorm_forward_bf16>,
      .gelu_forward_bf16 = stateless<cpu::gelu_forward_bf16>,
      .gelu_backward_bf16 = stateless<cpu::gelu_backward_bf16>,
      .swiglu_forward_bf16 = stateless<cpu::swiglu_forward_bf16>,
      .swiglu_backward_bf16 = stateless<cpu::swiglu_backward_bf16>,
      .rope_forward = stateless<cpu::rope_forward<float>>,
      .rope_backward = stateless<cpu::rope_backward<float>>,
      .attention_forward = stateless<cpu::attention_forward<float>>,
      .attention_backward = stateless<cpu::attention_backward<float>>,
      .flash_attention_forward = stateless<cpu::flash_attention_forward_f32>,
      .flash_attention_backward = stateless<cpu::flash_attention_backward_f32>,
      .flash_attention_forward_bf16 = stateless<cpu::flash_attention_forward_bf16>,
      .flash_attention_backward_bf16 = stateless<cpu::flash_attention_backward_bf16>,
      .flash_attention_block_forward = stateless<cpu::flash_attention_block_forward_f32>,
      .flash_attention_block_backward = stateless<cpu::flash_attention_block_backward_f32>,
      .copy_columns = stateless<cpu::copy_columns>,
      .residual_forward = stateless<cpu::residual_forward<float>>,
      .cross_entropy = stateless<cpu::cross_entropy<float>>,
      .softmax_row = stateless<cpu::softmax_row<float>>,
      .embedding_lookup = stateless<cpu::embedding_lookup<float>>,
      .embedding_lookup_backward = stateless<cpu::embedding_lookup_backward<float>>,
      .position_add = stateless<cpu::position_add<float>>,
      .position_add_backward = stateless<cpu::position_add_backward<float>>,
      .bias_residual = stateless<cpu::bias_residual<float>>,
      .ce_max = stateless<cpu::ce_max<float>>,
      .ce_exp_sum = stateless<cpu::ce_exp_sum<float>>,
      .ce_finalize = stateless<cpu::ce_finalize<float>>,
      .accumulate_sum = stateless<cpu::accumulate_sum>,
      .sum_squares = stateless<cpu::sum_squares_segments>,
      .count_nonfinite = stateless<cpu::count_nonfinite_segments>,
      .adamw = stateless<cpu::adamw_segments>,
      .cast = stateless<cpu::cast>,
      .gemm_bf16_path = cpu_bf16_paths,
      .supports = cpu_supports,
  };
}

}  // namespace

std::unique_ptr<Backend> make_cpu_backend() {
#if defined(TERA_HAVE_DNNL)
  const char* gemm = "oneDNN dnnl_sgemm";
#else
  const char* gemm = "portable sgemm (no oneDNN in this build)";
#endif
  return std::make_unique<Backend>("cpu", gemm, DeviceAddressing{DeviceAddressing::Kind::host}, cpu_ops(), nullptr);
}

const Backend& cpu_backend() {
  static const std::unique_ptr<Backend> backend = make_cpu_backend();
  return *backend;
}


}  // namespace tera
