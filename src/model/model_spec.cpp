// Parameter and activation tables, FLOP formulas. Initialisation follows GPT-2:
// N(0, 0.02) for weights and token embeddings, N(0, 0.01) for position
// embeddings, residual output projections scaled by 1/sqrt(2L), biases 0,
// LayerNorm gains 1.
#include "model/model_spec.h"

#include <algorithm>
#include <cmath>

#include "core/arena.h"

namespace tera {

Status validate_model_config(const ModelConfig& c) {
  auto positive = [](const char* key, int64_t v) -> Status {
    if (v <= 0) return Status::error(std::string("model.") + key + " = " + std::to_string(v) + " must be a positive integer");
    return Status::ok();
  };
  TERA_RETURN_IF_ERROR(positive("layers", c.layers));
  TERA_RETURN_IF_ERROR(positive("hidden", c.hidden));
  TERA_RETURN_IF_ERROR(positive("heads", c.heads));
  TERA_RETURN_IF_ERROR(positive("seq_len", c.seq_len));
  TERA_RETURN_IF_ERROR(positive("vocab", c.vocab));
  TERA_RETURN_IF_ERROR(positive("vocab_align", c.vocab_align));
  if (c.ffn_hidden < 0) return Status::error("model.ffn_hidden must be positive (or 0 for 4 * hidden)");
  if (c.hidden % c.heads != 0) {
    return Status::error("model.heads = " + std::to_string(c.heads) + " does not divide model.hidden = " +
                         std::to_string(c.hidden) + "; choose heads that divide hidden (head size = hidden / heads)");
  }
  if (c.vocab > (int64_t{1} << 31) - 1) return Status::error("model.vocab is larger than 2^31 - 1");
  return Status::ok();
}

ModelSpec::ModelSpec(ModelConfig cfg) : cfg_(cfg) {
  TERA_ASSERT(validate_model_config(cfg_).is_ok(), validate_model_config(cfg_).message());
  const int64_t C = cfg_.hidden, F = cfg_.ffn(), L = cfg_.layers;
  padded_vocab_ = round_up(cfg_.vocab, cfg_.vocab_align);
  const float std_w = 0.02f;
  const float std_proj = static_cast<float>(0.02 / std::sqrt(2.0 * static_cast<double>(L)));
  auto add = [&](std::string name, Shape shape, InitKind init, float sd, bool wd, int layer) {
    ParamInfo p;
    p.name = std::move(name);
    p.shape = shape;
    p.alloc_shape = shape;
    p.init = init;
    p.init_std = sd;
    p.weight_decay = wd;
    p.layer = layer;
    params_.push_back(std::move(p));
  };
  add("wte.weight", {cfg_.vocab, C}, InitKind::normal, std_w, true, -1);
  params_.back().alloc_shape = {padded_vocab_, C};
  add("wpe.weight", {cfg_.seq_len, C}, InitKind::normal, 0.01f, true, -1);
  for (int64_t l = 0; l < L; ++l) {
    const std::string p = "h." + std::to_string(l) + ".";
    const int li = static_cast<int>(l);
    add(p + "ln_1.weight", {C}, InitKind::ones, 0, false, li);
    add(p + "ln_1.bias", {C}, InitKind::zeros, 0, false, li);
    add(p + "attn.c_attn.weight", {3 * C, C}, InitKind::normal, std_w, true, li);
    add(p + "attn.c_attn.bias", {3 * C}, InitKind::zeros, 0, false, li);
    add(p + "attn.c_proj.weight", {C, C}, InitKind::normal, std_proj, true, li);
    add(p + "attn.c_proj.bias", {C}, InitKind::zeros, 0, false, li);
    add(p + "ln_2.weight", {C}, InitKind::ones, 0, false, li);
    add(p + "ln_2.bias", {C}, InitKind::zeros, 0, false, li);
    add(p + "mlp.c_fc.weight", {F, C}, InitKind::normal, std_w, true, li);
    add(p + "mlp.c_fc.bias", {F}, InitKind::zeros, 0, false, li);
    add(p + "mlp.c_proj.weight", {C, F}, InitKind::normal, std_proj, true, li);
    add(p + "mlp.c_proj.bias", {C}, InitKind::zeros, 0, false, li);
  }
  add("ln_f.weight", {C}, InitKind::ones, 0, false, static_cast<int>(L));
  add("ln_f.bias", {C}, InitKind::zeros, 0, false, static_cast<int>(L));
}

int64_t ModelSpec::num_params() const {
  int64_t n = 0;
  for (const auto& p : params_) n += numel(p.shape);
  return n;
}

int64_t ModelSpec::num_params_alloc() const {
  int64_t n = 0;
  for (const auto& p : params_) n += numel(p.alloc_shape);
  return n;
}

double ModelSpec::forward_flops_per_token() const {
  const double C = static_cast<double>(cfg_.hidden), F = static_cast<double>(cfg_.ffn());
  const double T = static_cast<double>(cfg_.seq_len), V = static_cast<double>(cfg_.vocab);
  const double per_layer = 2.0 * (3 * C * C + C * C + 2 * C * F) + 4.0 * T * C;
  return static_cast<double>(cfg_.layers) * per_layer + 2.0 * C * V;
}

double ModelSpec::train_flops_per_token(bool full_recompute) const {
  const double C = static_cast<double>(cfg_.hidden), V = static_cast<double>(cfg_.vocab);
  const double head = 2.0 * C * V;
  const double layers = forward_flops_per_token() - head;
  return (full_recompute ? 4.0 : 3.0) * layers + 3.0 * head;
}

const char* recompute_name(Recompute r) {
  switch (r) {
    case Recompute::none: return "none";
    case Recompute::selective: return "selective";
    case Recompute::full: return "full";
  }
  return "?";
}

std::vector<BufferInfo> ModelSpec::block_activations(int64_t B, int64_t T, const ActivationOptions& o) const {
  const int64_t C = cfg_.hidden, H = cfg_.heads, F = cfg_.ffn(), tp = o.tp;
  const int64_t Ts = o.sequence_parallel ? divide(T, tp) : T;  // sequence dim outside the TP regions
  const DType d = o.dtype;
  std::vector<BufferInfo> t = {
      // LayerNorm outputs feed the QKV / FC GEMMs; under sequence parallelism
      // they are kept sharded and all-gathered again in backward.
      {"ln1", {B, Ts, C}, d},
      {"ln1_mean", {B, Ts}, DType::f32},
      {"ln1_rstd", {B, Ts}, DType::f32},
      {"qkv", {B, T, 3 * divide(C, tp)}, d},
  };
  if (o.flash_attention) {
    t.push_back({"softmax_lse", {B, divide(H, tp), T}, DType::f32});
  } else {
    t.push_back({"probs", {B, divide(H, tp), T, T}, d});
    if (o.dropout) {
      t.push_back({"probs_dropout_mask", {B, divide(H, tp), T, T}, DType::u8});
      t.push_back({"probs_dropped", {B, divide(H, tp), T, T}, d});
    }
  }
  t.push_back({"atty", {B, T, divide(C, tp)}, d});
  if (o.dropout) t.push_back({"attn_dropout_mask", {B, Ts, C}, DType::u8});
  t.push_back({"res1", {B, Ts, C}, d});
  t.push_back({"ln2", {B, Ts, C}, d});
  t.push_back({"ln2_mean", {B, Ts}, DType::f32});
  t.push_back({"ln2_rstd", {B, Ts}, DType::f32});
  t.push_back({"fch", {B, T, divide(F, tp)}, d});
  t.push_back({"fch_gelu", {B, T, divide(F, tp)}, d});
  if (o.dropout) t.push_back({"mlp_dropout_mask", {B, Ts, C}, DType::u8});
  t.push_back({"out", {B, Ts, C}, d});
  return t;
}

std::vector<BufferInfo> ModelSpec::saved_block_activations(int64_t B, int64_t T, const ActivationOptions& o) const {
  switch (o.recompute) {
    case Recompute::none: return block_activations(B, T, o);
    case Recompute::full: {
      const int64_t Ts = o.sequence_parallel ? divide(T, o.tp) : T;
      return {{"x_in", {B, Ts, cfg_.hidden}, o.dtype}};
    }
    case Recompute::selective: {
      std::vector<BufferInfo> kept;
      for (auto& b : block_activations(B, T, o)) {
        if (b.name.rfind("probs", 0) != 0) kept.push_back(b);
      }
      return kept;
    }
  }
  return {};
}

std::vector<BufferInfo> ModelSpec::head_activations(int64_t B, int64_t T, const ActivationOptions& o) const {
  const int64_t C = cfg_.hidden;
  const int64_t Ts = o.sequence_parallel ? divide(T, o.tp) : T;
  return {
      {"tokens", {B, T}, DType::i32},
      {"targets", {B, T}, DType::i32},
      {"embed_out", {B, Ts, C}, o.dtype},  // input to block 0
      {"losses", {B, T}, DType::f32},
      {"dx_head", {B, Ts, C}, o.dtype},    // gradient w.r.t. the last block's output (eager head backward)
  };
}

std::vector<BufferInfo> ModelSpec::workspace(int64_t B, int64_t T, const ActivationOptions& o) const {
  const int64_t C = cfg_.hidden, F = cfg_.ffn(), tp = o.tp;
  const int64_t Vl = padded_vocab_ / tp;  // vocab-parallel logits
  const int64_t wide = std::max(divide(F, tp), 3 * divide(C, tp));
  const DType d = o.dtype;
  return {
      {"lnf", {B, T, C}, d},
      {"lnf_mean", {B, T}, DType::f32},
      {"lnf_rstd", {B, T}, DType::f32},
      {"logits", {B, T, Vl}, DType::f32},  // overwritten by dlogits
      {"dres", {B, T, C}, d},              // residual-stream gradient
      {"dwide", {B, T, wide}, d},          // d(fch_gelu), d(fch), d(qkv)
      {"dnarrow", {B, T, C}, d},           // d(ln2), d(atty), d(ln1), d(lnf)
  };
}

int64_t table_bytes(const std::vector<BufferInfo>& table) {
  int64_t n = 0;
  for (const auto& b : table) n += round_up(b.bytes(), ArenaLayout::kAlignFloats * 4);
  return n;
}

int64_t ModelSpec::activation_bytes(int64_t B, int64_t T, const ActivationOptions& o, int64_t layers) const {
  if (layers < 0) layers = cfg_.layers;
  int64_t bytes = layers * table_bytes(saved_block_activations(B, T, o)) + table_bytes(head_activations(B, T, o));
  if (o.recompute == Recompute::full && layers > 0) bytes += table_bytes(block_activations(B, T, o));
  return bytes;
}

int64_t ModelSpec::workspace_bytes(int64_t B, int64_t T, const ActivationOptions& o) const {
  return table_bytes(workspace(B, T, o));
}

}  // namespace tera
