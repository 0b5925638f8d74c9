// Parameter and activation tables, FLOP formulas. Initialisation follows GPT-2:
// N(0, 0.02) for weights and token embeddings, N(0, 0.01) for position
// embeddings, residual output projections scaled by 1/sqrt(2L), biases 0,
// LayerNorm gains 1.
#include "model/model_spec.h"

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

std::vector<BufferInfo> ModelSpec::block_activations(int64_t B, int64_t T) const {
  const int64_t C = cfg_.hidden, H = cfg_.heads, F = cfg_.ffn();
  return {
      {"ln1", {B, T, C}},        {"ln1_mean", {B, T}},     {"ln1_rstd", {B, T}},
      {"qkv", {B, T, 3 * C}},    {"probs", {B, H, T, T}},  {"atty", {B, T, C}},
      {"res1", {B, T, C}},       {"ln2", {B, T, C}},       {"ln2_mean", {B, T}},
      {"ln2_rstd", {B, T}},      {"fch", {B, T, F}},       {"fch_gelu", {B, T, F}},
      {"out", {B, T, C}},
  };
}

std::vector<BufferInfo> ModelSpec::head_activations(int64_t B, int64_t T) const {
  const int64_t C = cfg_.hidden;
  return {
      {"tokens", {B, T}},          // int32 stored in fp32-sized slots
      {"targets", {B, T}},         // int32
      {"embed_out", {B, T, C}},    // input to block 0
      {"losses", {B, T}},
      {"dx_head", {B, T, C}},      // gradient w.r.t. the last block's output (from the eager head backward)
  };
}

std::vector<BufferInfo> ModelSpec::workspace(int64_t B, int64_t T) const {
  const int64_t C = cfg_.hidden, F = cfg_.ffn(), Vp = padded_vocab_;
  const int64_t wide = F > 3 * C ? F : 3 * C;
  return {
      {"lnf", {B, T, C}},    {"lnf_mean", {B, T}},  {"lnf_rstd", {B, T}},
      {"logits", {B, T, Vp}},                        // overwritten by dlogits
      {"dres", {B, T, C}},                           // residual-stream gradient
      {"dwide", {B, T, wide}},                       // d(fch_gelu), d(fch), d(qkv)
      {"dnarrow", {B, T, C}},                        // d(ln2), d(atty), d(ln1), d(lnf)
  };
}

int64_t table_floats(const std::vector<BufferInfo>& table) {
  int64_t n = 0;
  for (const auto& b : table) n += round_up(numel(b.shape), ArenaLayout::kAlignFloats);
  return n;
}

int64_t ModelSpec::activation_bytes(int64_t B, int64_t T) const {
  return 4 * (cfg_.layers * table_floats(block_activations(B, T)) + table_floats(head_activations(B, T)));
}

int64_t ModelSpec::workspace_bytes(int64_t B, int64_t T) const { return 4 * table_floats(workspace(B, T)); }

}  // namespace tera
