// BlockPlan: the block variant chosen once; see block_plan.h.
#include "model/block_plan.h"

#include <string>

#include "core/check.h"

namespace tera {

const char* norm_kind_name(NormKind k) { return k == NormKind::rmsnorm ? "rmsnorm" : "layernorm"; }

const char* attention_path_name(AttentionPath a) {
  switch (a) {
    case AttentionPath::naive: return "naive";
    case AttentionPath::flash_f32: return "flash_f32";
    case AttentionPath::flash_bf16: return "flash_bf16";
    case AttentionPath::ring_f32: return "ring_f32";
    case AttentionPath::ring_bf16: return "ring_bf16";
  }
  return "?";
}

const char* mlp_path_name(MlpPath m) {
  switch (m) {
    case MlpPath::gelu: return "gelu";
    case MlpPath::gelu_fused: return "gelu_fused";
    case MlpPath::swiglu: return "swiglu";
  }
  return "?";
}

BlockPlan make_block_plan(const ModelConfig& cfg, DType gemm, const Backend& backend, int64_t cp) {
  TERA_ASSERT(gemm == DType::f32 || gemm == DType::bf16, "the linear layers take fp32 or bf16 inputs");
  TERA_ASSERT(gemm != DType::bf16 || missing_bf16_ops(backend).empty(),
              std::string(backend.name) + " lacks the bf16 ops " + missing_bf16_ops(backend));
  const bool bf16 = gemm == DType::bf16;
  const bool flash = cfg.attention == AttentionKind::flash;
  BlockPlan p;
  p.norm = cfg.arch == Arch::llama ? NormKind::rmsnorm : NormKind::layernorm;
  p.rotary = cfg.arch == Arch::llama;
  p.learned_positions = cfg.arch == Arch::gpt2;
  p.attention = !flash ? AttentionPath::naive : bf16 ? AttentionPath::flash_bf16 : AttentionPath::flash_f32;
  if (cp > 1) {
    TERA_ASSERT(flash, "context parallelism's ring attention runs the flash kernels (model.attention = \"flash\")");
    TERA_ASSERT(missing_cp_ops(backend).empty(),
                std::string(backend.name) + " lacks the context-parallel ops " + missing_cp_ops(backend));
    p.attention = bf16 ? AttentionPath::ring_bf16 : AttentionPath::ring_f32;
  }
  if (cfg.mlp == MlpKind::gated) {
    p.mlp = MlpPath::swiglu;
  } else {
    const bool fused_ops = has_op(backend, KernelOp::linear_gelu_forward_bf16) &&
                           has_op(backend, KernelOp::linear_backward_gelu_bf16);
    p.mlp = bf16 && fused_ops ? MlpPath::gelu_fused : MlpPath::gelu;
  }
  p.gemm = gemm;
  // As ModelSpec::block_activations keeps them: the linear layers' inputs
  // and the MLP's tensors in the GEMM dtype; qkv and atty too when the flash
  // kernels read them so.
  p.norm_out = gemm;
  p.attn_io = flash ? gemm : DType::f32;
  p.mlp_act = gemm;
  return p;
}

DType planned_dtype(const BlockPlan& plan, std::string_view name) {
  if (name == "ln1" || name == "ln2") return plan.norm_out;
  if (name == "qkv" || name == "atty") return plan.attn_io;
  if (name == "fch" || name == "fch_gelu" || name == "fch_gate" || name == "fch_swiglu") return plan.mlp_act;
  return DType::f32;
}

void check_block_acts(const BlockPlan& plan, const BlockActs& a, std::string_view what) {
  for (const auto& row : kBlockActRows) {
    const TypedView& v = a.*row.field;
    const DType want = planned_dtype(plan, row.name);
    TERA_ASSERT(v.empty() || v.dtype() == want, std::string(what) + ": " + std::string(row.name) + " is " +
                                                     dtype_name(v.dtype()) + ", the block plan keeps it in " +
                                                     dtype_name(want));
  }
  const bool naive = plan.attention == AttentionPath::naive;
  TERA_ASSERT(naive ? !a.probs.empty() : !a.lse.empty(),
              std::string(what) + ": the memory plan has no " + (naive ? "probs" : "softmax_lse") + " buffer");
  const bool swiglu = plan.mlp == MlpPath::swiglu;
  TERA_ASSERT(swiglu ? !a.fch_gate.empty() && !a.fch_swiglu.empty() : !a.fch_gelu.empty(),
              std::string(what) + ": the memory plan lacks the " + mlp_path_name(plan.mlp) + " MLP's tensors");
  const bool deferred = !a.dw_qkv.empty() && !a.dw_proj.empty() && !a.dw_fc.empty() && !a.dw_fcp.empty() &&
                        !a.dw_ln1_g.empty() && !a.dw_ln2_g.empty() && (!swiglu || !a.dw_gate.empty()) &&
                        (plan.norm != NormKind::layernorm || (!a.dw_ln1_b.empty() && !a.dw_ln2_b.empty()));
  TERA_ASSERT(plan.split_backward ? deferred : a.dw_qkv.empty(),
              std::string(what) + (plan.split_backward ? ": the split backward needs the memory plan's dw_ tensors"
                                                       : ": dw_ tensors without a split backward"));
}

}  // namespace tera
