// BlockPlan: which variant of a transformer block this rank runs, decided
// once when the model is built (STYLE.md principle 17) from the model's
// config, the GEMM precision and the backend's ops, and then only read: the
// block's forward and backward switch on its named kinds, never on which
// buffers happen to exist. It also states the dtype each kept activation is
// in; the views bound from the memory plan (ModelSpec::block_activations,
// which decides the same from the same settings) are checked against it.
#pragma once

#include <string_view>

#include "core/tensor.h"
#include "kernels/backend.h"
#include "model/block_tensors.h"
#include "model/model_spec.h"

namespace tera {

enum class NormKind {
  layernorm,  // GPT-2: mean and bias
  rmsnorm,    // Llama: no mean, no bias, model.norm_eps
};

enum class AttentionPath {
  naive,       // keeps the T x T probabilities; qkv and atty fp32 in either precision
  flash_f32,   // keeps the row log-sum-exp
  flash_bf16,  // bf16 GEMMs: the flash kernels' products take the bf16 qkv and atty they keep
  // Context parallelism (cp > 1): the ring of flash block kernels over the cp
  // group (model/ring_attention.h), fp32 kernels; keeps the row log-sum-exp.
  ring_f32,
  ring_bf16,   // bf16 GEMMs: qkv and atty kept in bf16, widened to fp32 for the ring kernels
};

enum class MlpPath {
  gelu,        // GPT-2: fc, GELU, projection
  gelu_fused,  // bf16 GEMMs on a backend with the fused ops: fc + GELU in one op, its backward too
  swiglu,      // Llama: up and gate, silu(gate) * up, down projection
};

const char* norm_kind_name(NormKind k);           // "layernorm", "rmsnorm"
const char* attention_path_name(AttentionPath a);  // "naive", "flash_f32", "flash_bf16", "ring_f32", "ring_bf16"
const char* mlp_path_name(MlpPath m);              // "gelu", "gelu_fused", "swiglu"

struct BlockPlan {
  NormKind norm = NormKind::layernorm;
  bool rotary = false;  // the rotary embedding on q and k (Llama); GPT-2's positions are the embedding's
  bool learned_positions = false;  // the embedding adds the learned positions wpe (GPT-2)
  AttentionPath attention = AttentionPath::flash_f32;
  MlpPath mlp = MlpPath::gelu;
  DType gemm = DType::f32;  // the linear layers' input dtype (train.precision)
  // The dtype of each kept tensor that is not always fp32.
  DType norm_out = DType::f32;  // ln1, ln2: the QKV and FC GEMMs' inputs
  DType attn_io = DType::f32;   // qkv, atty
  DType mlp_act = DType::f32;   // fch, fch_gelu, fch_gate, fch_swiglu
  // The zero-bubble schedule's B/W split (ActivationOptions::
  // defer_weight_grads): block_backward computes input gradients only and
  // keeps the rest in the block's dw_ tensors; block_weight_grads adds the
  // parameter gradients later.
  bool split_backward = false;
};

// The plan of a block of `cfg` with the linear layers' inputs in `gemm`
// (f32 or bf16) on `backend`, its sequences split over cp context-parallel
// ranks. The MLP is fused exactly when bf16 GEMMs run a GELU MLP on a
// backend that has linear_gelu_forward_bf16 and linear_backward_gelu_bf16.
// cp > 1 needs flash attention and the backend's cp ops (the config check
// refuses the rest).
BlockPlan make_block_plan(const ModelConfig& cfg, DType gemm, const Backend& backend, int64_t cp = 1);

// The dtype `plan` keeps the activation `name` (ModelSpec::block_activations) in.
DType planned_dtype(const BlockPlan& plan, std::string_view name);

// Asserts that the views bound from the memory plan are what `plan` runs:
// each tensor in its planned dtype, and the attention's saved tensor
// (probs or lse) present, the dw_ tensors exactly when the backward is
// split; `what` names the views in the message.
void check_block_acts(const BlockPlan& plan, const BlockActs& a, std::string_view what);

}  // namespace tera
