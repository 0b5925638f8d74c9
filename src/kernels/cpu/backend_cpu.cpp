// The CPU backend table: fp32 instantiations of the kernels in cpu_ops.h,
// over device memory that is plain host memory (memory.cpp).
#include <string>
#include <string_view>

#include "kernels/backend.h"
#include "kernels/cpu/cpu_ops.h"
#include "kernels/cpu/tile_mac.h"
#if defined(TERA_HAVE_GPU_EMU)
#include "kernels/gpu/emu/backend_gpu_emu.h"
#endif
#if defined(TERA_HAVE_CUDA)
#include "kernels/gpu/cuda/backend_cuda.h"
#endif

namespace tera {

namespace {
// What multiplies bf16 on this CPU: the linear layers' GEMMs and the flash
// attention's tile products, in words, for tera train's start-up line.
const char* cpu_bf16_paths() {
  static const std::string s =
      std::string(cpu::gemm_bf16_path()) + "; flash attention tiles by " + cpu::tile_mac_bf16_path();
  return s.c_str();
}

bool cpu_supports(KernelOp op, DType dtype) {
  // The ops train.precision = "bf16" calls work in bf16; the rest in fp32.
  return dtype == DType::bf16 ? kernel_op_need(op) == OpNeed::bf16 : dtype == DType::f32;
}
}  // namespace

const Backend& cpu_backend() {
  static const Backend backend = {
      .name = "cpu",
#if defined(TERA_HAVE_DNNL)
      .gemm_library = "oneDNN dnnl_sgemm",
#else
      .gemm_library = "portable sgemm (no oneDNN in this build)",
#endif
      .gemm_bf16_path = cpu_bf16_paths,
      .addressing = DeviceAddressing{DeviceAddressing::Kind::host, nullptr},
      .alloc = cpu::alloc,
      .release = cpu::release,
      .fill = cpu::fill,
      .copy = cpu::copy,
      .gemm = cpu::gemm<float>,
      .linear_forward = cpu::linear_forward<float>,
      .linear_backward = cpu::linear_backward<float>,
      .linear_forward_bf16 = cpu::linear_forward_bf16,
      .linear_backward_bf16 = cpu::linear_backward_bf16,
      .layernorm_forward = cpu::layernorm_forward<float>,
      .layernorm_backward = cpu::layernorm_backward<float>,
      .rmsnorm_forward = cpu::rmsnorm_forward<float>,
      .rmsnorm_backward = cpu::rmsnorm_backward<float>,
      .gelu_forward = cpu::gelu_forward<float>,
      .gelu_backward = cpu::gelu_backward<float>,
      .swiglu_forward = cpu::swiglu_forward<float>,
      .swiglu_backward = cpu::swiglu_backward<float>,
      .layernorm_forward_bf16 = cpu::layernorm_forward_bf16,
      .rmsnorm_forward_bf16 = cpu::rmsnorm_forward_bf16,
      .gelu_forward_bf16 = cpu::gelu_forward_bf16,
      .gelu_backward_bf16 = cpu::gelu_backward_bf16,
      .swiglu_forward_bf16 = cpu::swiglu_forward_bf16,
      .swiglu_backward_bf16 = cpu::swiglu_backward_bf16,
      .rope_forward = cpu::rope_forward<float>,
      .rope_backward = cpu::rope_backward<float>,
      .attention_forward = cpu::attention_forward<float>,
      .attention_backward = cpu::attention_backward<float>,
      .flash_attention_forward = cpu::flash_attention_forward_f32,
      .flash_attention_backward = cpu::flash_attention_backward_f32,
      .flash_attention_forward_bf16 = cpu::flash_attention_forward_bf16,
      .flash_attention_backward_bf16 = cpu::flash_attention_backward_bf16,
      .residual_forward = cpu::residual_forward<float>,
      .cross_entropy = cpu::cross_entropy<float>,
      .softmax_row = cpu::softmax_row<float>,
      .embedding_lookup = cpu::embedding_lookup<float>,
      .embedding_lookup_backward = cpu::embedding_lookup_backward<float>,
      .position_add = cpu::position_add<float>,
      .position_add_backward = cpu::position_add_backward<float>,
      .bias_residual = cpu::bias_residual<float>,
      .ce_max = cpu::ce_max<float>,
      .ce_exp_sum = cpu::ce_exp_sum<float>,
      .ce_finalize = cpu::ce_finalize<float>,
      .accumulate_sum = cpu::accumulate_sum,
      .sum_squares = cpu::sum_squares_segments,
      .count_nonfinite = cpu::count_nonfinite_segments,
      .adamw = cpu::adamw_segments,
      .cast = cpu::cast,
      .supports = cpu_supports,
  };
  return backend;
}

const Backend* find_backend(std::string_view name) {
  if (name == "cpu") return &cpu_backend();
  if (name == "cpu-guarded") return &cpu_guarded_backend();
#if defined(TERA_HAVE_GPU_EMU)
  if (name == "gpu-emu") return &gpu_emu_backend();
#endif
#if defined(TERA_HAVE_CUDA)
  if (name == "cuda") return &cuda_backend();
#endif
  return nullptr;
}

std::string backend_names() {
  std::string names = "cpu, cpu-guarded";
#if defined(TERA_HAVE_GPU_EMU)
  names += ", gpu-emu";
#endif
#if defined(TERA_HAVE_CUDA)
  names += ", cuda";
#endif
  return names;
}

}  // namespace tera
