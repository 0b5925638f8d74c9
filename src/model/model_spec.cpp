// Parameter and activation tables, FLOP formulas. Initialisation follows GPT-2:
// N(0, 0.02) for weights and token embeddings, N(0, 0.01) for position
// embeddings, residual output projections scaled by 1/sqrt(2L), biases 0,
// LayerNorm gains 1.
#include "model/model_spec.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>

#include "core/arena.h"

namespace tera {

namespace {

// Llama 3.1's scaling as Hugging Face's _validate_llama3_parameters checks it.
Status validate_rope_scaling(const ModelConfig::RopeScaling& s) {
  if (!s.llama3) return ok_status();
  if (!(s.factor >= 1 && s.factor <= 1e6)) {
    return Status::error(fmt::format("model.rope_factor = {} must lie in [1, 1e6] (Llama 3.1: 8; 1 is no scaling)", s.factor));
  }
  if (!(s.low_freq_factor > 0 && s.high_freq_factor > s.low_freq_factor && s.high_freq_factor <= 1e6)) {
    return Status::error(fmt::format("model.rope_low_freq_factor = {} and model.rope_high_freq_factor = {} must satisfy "
                                     "0 < low < high (Llama 3.1: 1 and 4)",
                                     s.low_freq_factor, s.high_freq_factor));
  }
  if (s.original_max_positions < 1 || s.original_max_positions > (int64_t{1} << 30)) {
    return Status::error(fmt::format("model.rope_original_seq_len = {} must be a positive context length (Llama 3.1: "
                                     "8192, the context before scaling)",
                                     s.original_max_positions));
  }
  return ok_status();
}

}  // namespace

Status validate_model_config(const ModelConfig& c) {
  auto positive = [](const char* key, int64_t v) -> Status {
    if (v <= 0) return Status::error(std::string("model.") + key + " = " + std::to_string(v) + " must be a positive integer");
    return ok_status();
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
  // Sizes the 64-bit element and byte counts can hold: every dimension fits
  // in 32 bits (tokens are int32, MPI counts are int) and the parameter and
  // per-token activation counts, computed here in long double, stay far
  // below 2^63 bytes. Whether a run fits in memory is checked separately,
  // before allocation, against the memory the machine has.
  // Per-layer tables (parameters, activations) are host metadata of a few
  // KiB a layer: more layers than any model has would exhaust memory there.
  constexpr int64_t kMaxLayers = int64_t{1} << 16;
  if (c.layers > kMaxLayers) {
    return Status::error("model.layers = " + std::to_string(c.layers) + " is more than tera supports (" +
                         std::to_string(kMaxLayers) + "); the largest published models have a few hundred");
  }
  constexpr int64_t kMaxDim = (int64_t{1} << 31) - 1;
  for (const auto& [key, v] : {std::pair<const char*, int64_t>{"layers", c.layers}, {"hidden", c.hidden},
                               {"seq_len", c.seq_len}, {"ffn_hidden", c.ffn_hidden}, {"vocab_align", c.vocab_align}}) {
    if (v > kMaxDim) {
      return Status::error(std::string("model.") + key + " = " + std::to_string(v) + " is larger than 2^31 - 1");
    }
  }
  const long double C = static_cast<long double>(c.hidden), F = static_cast<long double>(c.ffn());
  const long double V = static_cast<long double>(c.vocab) + static_cast<long double>(c.vocab_align);
  const long double params = static_cast<long double>(c.layers) * (4 * C * C + 3 * C * F + 13 * C + F) + V * C +
                             static_cast<long double>(c.seq_len) * C;
  constexpr long double kMaxParams = static_cast<long double>(int64_t{1} << 50);  // 4 PiB of fp32 weights
  if (params > kMaxParams) {
    return Status::error(fmt::format("model: {:.3g} parameters (layers {}, hidden {}, ffn {}, vocab {}) is beyond "
                                     "what tera's 64-bit byte counts hold (at most 2^50 = {:.3g}); check model.layers, "
                                     "model.hidden and model.vocab",
                                     static_cast<double>(params), c.layers, c.hidden, c.ffn(), c.vocab,
                                     static_cast<double>(kMaxParams)));
  }
  if (c.kv_heads < 0 || c.kv_heads > c.heads || c.heads % c.kv() != 0) {
    return Status::error("model.kv_heads = " + std::to_string(c.kv_heads) + " must divide model.heads = " +
                         std::to_string(c.heads) + " (0 means kv_heads = heads); choose a divisor of heads");
  }
  if (c.arch == Arch::llama) {
    if (c.mlp != MlpKind::gated) {
      return Status::error("model.arch = \"llama\" has the gated (SwiGLU) MLP: remove model.mlp or set it to \"gated\"");
    }
    if (c.head_size() % 2 != 0) {
      return Status::error("model.arch = \"llama\": rotary embeddings rotate pairs, so the head size hidden / heads = " +
                           std::to_string(c.head_size()) + " must be even; choose model.heads so it is");
    }
    if (c.head_size() > 1024) {  // kernels/gpu/kernels/llama.cuh: kRopeMaxPairs
      return Status::error("model.arch = \"llama\": the head size hidden / heads = " + std::to_string(c.head_size()) +
                           " is above 1024, the most the rotary kernels tabulate; choose more model.heads");
    }
    if (!(c.rope_theta > 1 && c.rope_theta <= 1e12)) {
      return Status::error(fmt::format("model.rope_theta = {} must lie in (1, 1e12] (Llama 2: 10000, Llama 3: 500000)",
                                       c.rope_theta));
    }
    TERA_RETURN_IF_ERROR(validate_rope_scaling(c.rope_scaling));
    if (!(c.norm_eps > 0) || !(c.norm_eps < 1)) {
      return Status::error(fmt::format("model.norm_eps = {} must be in (0, 1) (Llama: 1e-5 or 1e-6)", c.norm_eps));
    }
  }
  return ok_status();
}

const char* mlp_kind_name(MlpKind k) { return k == MlpKind::gated ? "gated" : "standard"; }

Expected<MlpKind> parse_mlp_kind(const std::string& name) {
  if (name == "standard") return MlpKind::standard;
  if (name == "gated") return MlpKind::gated;
  return Status::error("model.mlp = \"" + name + "\" is not a known MLP; choose \"standard\" (GPT-2) or \"gated\" (SwiGLU)");
}

const char* attention_kind_name(AttentionKind k) { return k == AttentionKind::flash ? "flash" : "naive"; }

Expected<AttentionKind> parse_attention_kind(const std::string& name) {
  if (name == "flash") return AttentionKind::flash;
  if (name == "naive") return AttentionKind::naive;
  return Status::error("model.attention = \"" + name +
                       "\" is not a known attention; choose \"flash\" (tiles, no T x T matrix kept) or \"naive\"");
}

const char* arch_name(Arch a) { return a == Arch::llama ? "llama" : "gpt2"; }

Expected<Arch> parse_arch(const std::string& name) {
  if (name == "gpt2") return Arch::gpt2;
  if (name == "llama") return Arch::llama;
  return Status::error("model.arch = \"" + name + "\" is not a known architecture; choose \"gpt2\" or \"llama\"");
}

Status check_runtime_supports(const ModelConfig& c) {
  if (c.arch == Arch::gpt2 && c.mlp != MlpKind::standard) {
    return Status::error(std::string("model.mlp = \"") + mlp_kind_name(c.mlp) +
                         "\" on a GPT-2 block is a shape only `tera plan` prices; the runtime's gated MLP is "
                         "Llama's: set model.arch = \"llama\", or remove model.mlp");
  }
  return ok_status();
}

ModelSpec::ModelSpec(ModelConfig cfg) : cfg_(cfg) {
  TERA_ASSERT(validate_model_config(cfg_).is_ok(), validate_model_config(cfg_).message());
  const int64_t C = cfg_.hidden, F = cfg_.ffn(), L = cfg_.layers, Q = cfg_.qkv_width();
  const int64_t hs = cfg_.head_size();
  const float std_w = 0.02f;
  const float std_proj = static_cast<float>(0.02 / std::sqrt(2.0 * static_cast<double>(L)));
  auto add = [&](std::string name, Shape shape, InitKind init, float sd, bool wd, int layer,
                 TpSplit split = TpSplit::none, bool sp_partial = false) {
    ParamInfo p;
    p.name = std::move(name);
    p.shape = shape;
    p.alloc_shape = shape;
    p.init = init;
    p.init_std = sd;
    p.weight_decay = wd;
    p.layer = layer;
    p.tp_split = split;
    if (split == TpSplit::rows) p.row_groups = {shape[0]};
    p.sp_partial_grad = sp_partial;
    params_.push_back(std::move(p));
  };
  const bool llama = cfg_.arch == Arch::llama, bias = cfg_.biases();
  // Root unit: position embedding (GPT-2) and final norm (sequence-parallel
  // partial gradients), then the vocab-parallel token embedding (tied to the
  // LM head unless tie_embeddings is off: then the head has its own matrix,
  // lm_head.weight, on the head's stage).
  const int root = -1, final_norm = static_cast<int>(L);
  if (!llama) add("wpe.weight", {cfg_.seq_len, C}, InitKind::normal, 0.01f, true, root, TpSplit::none, true);
  add("ln_f.weight", {C}, InitKind::ones, 0, false, final_norm, TpSplit::none, true);
  if (bias) add("ln_f.bias", {C}, InitKind::zeros, 0, false, final_norm, TpSplit::none, true);
  add("wte.weight", {cfg_.vocab, C}, InitKind::normal, std_w, true, root, TpSplit::rows);
  params_.back().alloc_shape = {padded_vocab(), C};
  params_.back().token_embedding = true;
  if (!cfg_.tied()) {
    add("lm_head.weight", {cfg_.vocab, C}, InitKind::normal, std_w, true, final_norm, TpSplit::rows);
    params_.back().alloc_shape = {padded_vocab(), C};
    params_.back().output_embedding = true;
  }
  const std::vector<int64_t> qkv_groups = {cfg_.heads * hs, cfg_.kv() * hs, cfg_.kv() * hs};
  for (int64_t l = 0; l < L; ++l) {
    const std::string p = "h." + std::to_string(l) + ".";
    const int li = static_cast<int>(l);
    // Norm gains first (sequence-parallel partial gradients), then the
    // replicated biases, then the tensor-parallel splits.
    add(p + "ln_1.weight", {C}, InitKind::ones, 0, false, li, TpSplit::none, true);
    if (bias) add(p + "ln_1.bias", {C}, InitKind::zeros, 0, false, li, TpSplit::none, true);
    add(p + "ln_2.weight", {C}, InitKind::ones, 0, false, li, TpSplit::none, true);
    if (bias) {
      add(p + "ln_2.bias", {C}, InitKind::zeros, 0, false, li, TpSplit::none, true);
      // Row-parallel biases are added once, after the reduction: replicated.
      add(p + "attn.c_proj.bias", {C}, InitKind::zeros, 0, false, li);
      add(p + "mlp.c_proj.bias", {C}, InitKind::zeros, 0, false, li);
    }
    add(p + "attn.c_attn.weight", {Q, C}, InitKind::normal, std_w, true, li, TpSplit::rows);
    params_.back().row_groups = qkv_groups;
    params_.back().kv_row_groups = true;
    if (bias) {
      add(p + "attn.c_attn.bias", {Q}, InitKind::zeros, 0, false, li, TpSplit::rows);
      params_.back().row_groups = qkv_groups;
      params_.back().kv_row_groups = true;
    }
    add(p + "attn.c_proj.weight", {C, C}, InitKind::normal, std_proj, true, li, TpSplit::cols);
    add(p + "mlp.c_fc.weight", {F, C}, InitKind::normal, std_w, true, li, TpSplit::rows);  // Llama's up_proj
    if (bias) add(p + "mlp.c_fc.bias", {F}, InitKind::zeros, 0, false, li, TpSplit::rows);
    if (cfg_.mlp == MlpKind::gated) {  // SwiGLU gate: c_proj(silu(c_gate(x)) * c_fc(x))
      add(p + "mlp.c_gate.weight", {F, C}, InitKind::normal, std_w, true, li, TpSplit::rows);
      if (bias) add(p + "mlp.c_gate.bias", {F}, InitKind::zeros, 0, false, li, TpSplit::rows);
    }
    add(p + "mlp.c_proj.weight", {C, F}, InitKind::normal, std_proj, true, li, TpSplit::cols);  // Llama's down_proj
  }
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
  const double Q = static_cast<double>(cfg_.qkv_width()), m = static_cast<double>(cfg_.mlp_matrices());
  const double per_layer = 2.0 * (Q * C + C * C + m * C * F) + 4.0 * T * C;
  return static_cast<double>(cfg_.layers) * per_layer + 2.0 * C * V;
}

double ModelSpec::train_flops_per_token(bool full_recompute) const {
  const double C = static_cast<double>(cfg_.hidden), V = static_cast<double>(cfg_.vocab);
  const double head = 2.0 * C * V;
  const double layers = forward_flops_per_token() - head;
  return (full_recompute ? 4.0 : 3.0) * layers + 3.0 * head;
}

int64_t ModelSpec::qkv_width_local(int64_t tp) const {
  if (cfg_.kv() == cfg_.heads) return 3 * divide(cfg_.hidden, tp);
  return (divide(cfg_.heads, tp) + 2 * kv_heads_local(tp)) * cfg_.head_size();
}

int64_t ModelSpec::kv_replicas(int64_t tp) const {
  const int64_t kv = cfg_.kv();
  if (tp <= kv) return 1;
  TERA_ASSERT(tp % kv == 0, "tp " + std::to_string(tp) + " is neither a divisor nor a multiple of kv_heads " +
                                std::to_string(kv) + " (check_layout refuses it)");
  return tp / kv;
}

int64_t ModelSpec::kv_heads_local(int64_t tp) const {
  return kv_replicas(tp) > 1 ? 1 : divide(cfg_.kv(), tp);
}

int64_t ModelSpec::group_rows_local(const ParamInfo& p, size_t g, int64_t tp) const {
  const int64_t rows = p.row_groups[g];
  if (p.kv_row_groups && g > 0 && kv_replicas(tp) > 1) return rows / cfg_.kv();  // one whole head
  return divide(rows, tp);
}

int64_t ModelSpec::group_share(const ParamInfo& p, size_t g, int64_t tp, int64_t tp_rank) const {
  // Replicated key/value heads: tp rank t's query heads read head t / replicas.
  if (p.kv_row_groups && g > 0 && kv_replicas(tp) > 1) return tp_rank / kv_replicas(tp);
  return tp_rank;
}

std::vector<BufferInfo> ModelSpec::block_activations(int64_t B, int64_t T, const ActivationOptions& o) const {
  const int64_t C = cfg_.hidden, H = cfg_.heads, F = cfg_.ffn(), tp = o.tp;
  const int64_t Ts = o.sequence_parallel ? divide(T, tp) : T;  // sequence dim outside the TP regions
  const DType d = o.dtype;
  // The norm outputs and the MLP's tensors: bf16 with bf16 GEMMs.
  const DType gemm_in = o.gemm == DType::bf16 ? DType::bf16 : d;
  const int64_t qkv_local = qkv_width_local(tp);
  // Norm outputs feed the QKV / FC GEMMs; under sequence parallelism they
  // are kept sharded and all-gathered again in backward. RMSNorm (Llama)
  // keeps no mean.
  const bool ln = cfg_.arch != Arch::llama;
  std::vector<BufferInfo> t = {{"ln1", {B, Ts, C}, gemm_in}};
  if (ln) t.push_back({"ln1_mean", {B, Ts}, DType::f32});
  t.push_back({"ln1_rstd", {B, Ts}, DType::f32});
  // qkv and atty: bf16 when bf16 GEMMs run flash attention (whose bf16 kernels read them so).
  t.push_back({"qkv", {B, T, qkv_local}, o.flash_attention ? gemm_in : d});
  if (o.flash_attention) {
    t.push_back({"softmax_lse", {B, divide(H, tp), T}, DType::f32});
  } else {
    t.push_back({"probs", {B, divide(H, tp), T, T}, d});
    if (o.dropout) {
      t.push_back({"probs_dropout_mask", {B, divide(H, tp), T, T}, DType::u8});
      t.push_back({"probs_dropped", {B, divide(H, tp), T, T}, d});
    }
  }
  t.push_back({"atty", {B, T, divide(C, tp)}, o.flash_attention ? gemm_in : d});
  if (o.dropout) t.push_back({"attn_dropout_mask", {B, Ts, C}, DType::u8});
  t.push_back({"res1", {B, Ts, C}, d});
  t.push_back({"ln2", {B, Ts, C}, gemm_in});
  if (ln) t.push_back({"ln2_mean", {B, Ts}, DType::f32});
  t.push_back({"ln2_rstd", {B, Ts}, DType::f32});
  t.push_back({"fch", {B, T, divide(F, tp)}, gemm_in});
  if (cfg_.mlp == MlpKind::gated) {
    t.push_back({"fch_gate", {B, T, divide(F, tp)}, gemm_in});    // gate pre-activation
    t.push_back({"fch_swiglu", {B, T, divide(F, tp)}, gemm_in});  // silu(gate) * up, input to c_proj
  } else {
    t.push_back({"fch_gelu", {B, T, divide(F, tp)}, gemm_in});
  }
  if (o.dropout) t.push_back({"mlp_dropout_mask", {B, Ts, C}, DType::u8});
  t.push_back({"out", {B, Ts, C}, d});
  return t;
}

std::vector<BufferInfo> ModelSpec::saved_block_activations(int64_t B, int64_t T, const ActivationOptions& o) const {
  std::vector<BufferInfo> kept;
  switch (o.recompute) {
    case Recompute::none: kept = block_activations(B, T, o); break;
    case Recompute::full: {
      TERA_ASSERT(!o.defer_weight_grads, "deferred weight gradients need the block's saved inputs (not with full recompute)");
      const int64_t Ts = o.sequence_parallel ? divide(T, o.tp) : T;
      return {{"x_in", {B, Ts, cfg_.hidden}, o.dtype}};
    }
    case Recompute::selective:
      for (auto& b : block_activations(B, T, o)) {
        if (b.name.rfind("probs", 0) != 0) kept.push_back(b);
      }
      break;
  }
  if (o.defer_weight_grads) {
    const int64_t C = cfg_.hidden, Fl = divide(cfg_.ffn(), o.tp);
    kept.push_back({"dw_qkv", {B, T, qkv_width_local(o.tp)}, DType::f32});
    kept.push_back({"dw_proj", {B, T, C}, DType::f32});
    kept.push_back({"dw_fc", {B, T, Fl}, DType::f32});
    if (cfg_.mlp == MlpKind::gated) kept.push_back({"dw_gate", {B, T, Fl}, DType::f32});
    kept.push_back({"dw_fcp", {B, T, C}, DType::f32});
    const bool ln = cfg_.arch != Arch::llama;
    for (const char* norm : {"dw_ln1", "dw_ln2"}) {
      kept.push_back({std::string(norm) + "_g", {C}, DType::f32});
      if (ln) kept.push_back({std::string(norm) + "_b", {C}, DType::f32});
    }
  }
  return kept;
}

Shape ModelSpec::local_shape(const ParamInfo& p, int64_t tp) const {
  Shape s = p.alloc_shape;
  switch (p.tp_split) {
    case TpSplit::none: break;
    case TpSplit::rows:
      if (p.token_embedding || p.output_embedding) {
        s[0] = divide(padded_vocab(tp), tp);  // the vocab-parallel embedding and LM head
      } else {
        s[0] = 0;
        for (size_t g = 0; g < p.row_groups.size(); ++g) s[0] += group_rows_local(p, g, tp);
      }
      break;
    case TpSplit::cols: s[1] = divide(s[1], tp); break;
  }
  return s;
}

std::vector<BufferInfo> ModelSpec::chunk_activations(int64_t B, int64_t T, const ActivationOptions& o, bool embedding,
                                                     bool head) const {
  const int64_t C = cfg_.hidden;
  const int64_t Ts = o.sequence_parallel ? divide(T, o.tp) : T;
  std::vector<BufferInfo> t;
  if (embedding) t.push_back({"tokens", {B, T}, DType::i32});
  t.push_back({"input", {B, Ts, C}, o.dtype});  // embedding output or received activation (this rank's tokens under sp)
  if (head) {
    t.push_back({"targets", {B, T}, DType::i32});
    t.push_back({"losses", {B, T}, DType::f32});
    t.push_back({"dx_head", {B, Ts, C}, o.dtype});  // d(last block's output), from the eager head backward
  } else {
    t.push_back({"grad_in", {B, Ts, C}, o.dtype});  // d(output), received from the next stage
  }
  if (!embedding) t.push_back({"grad_out", {B, Ts, C}, o.dtype});  // d(input), sent to the previous stage
  return t;
}

std::vector<BufferInfo> ModelSpec::workspace(int64_t B, int64_t T, const ActivationOptions& o) const {
  const int64_t C = cfg_.hidden, tp = o.tp;
  const int64_t Ts = o.sequence_parallel ? divide(T, tp) : T;
  const int64_t Vl = padded_vocab(tp) / tp;  // vocab-parallel logits
  const int64_t Fl = divide(cfg_.ffn(), tp);
  const bool gated = cfg_.mlp == MlpKind::gated;
  const DType d = o.dtype;
  std::vector<BufferInfo> t = {{"lnf", {B, T, C}, d, true}};  // final norm output, gathered: the LM-head GEMM input
  if (cfg_.arch != Arch::llama) t.push_back({"lnf_mean", {B, Ts}, DType::f32, true});  // LayerNorm only
  for (BufferInfo b : std::vector<BufferInfo>{
           {"lnf_rstd", {B, Ts}, DType::f32, true},
           {"logits", {B, T, Vl}, DType::f32, true},   // this rank's vocabulary columns; overwritten by dlogits
           {"ce_stats", {3, B, T}, DType::f32, true},  // row max, sum of exp, target logit
           {"dres", {B, Ts, C}, d},                    // residual-stream gradient
           // d(fch_gelu), d(fch), d(qkv); bf16 GEMMs, in forward: qkv and fch in fp32
           {"dwide", {B, T, std::max(Fl, qkv_width_local(tp))}, d},
       }) {
    t.push_back(std::move(b));
  }
  if (gated) t.push_back({"dgate", {B, T, Fl}, d});  // d(gate); bf16 GEMMs, in forward: the gate in fp32
  // d(ln2), d(atty), d(ln1), d(lnf); bf16 GEMMs with flash, in forward: atty in fp32
  t.push_back({"dnarrow", {B, T, C}, d});
  if (o.sequence_parallel) {
    t.push_back({"lnf_shard", {B, Ts, C}, d, true});  // LN_f output on this rank's tokens
    t.push_back({"full", {B, T, C}, d});        // gathered LN outputs, partial sums, full-token gradients
  }
  if (o.gemm == DType::bf16) {
    // A linear layer's operands rounded to bf16 (ops.h LinearForwardBf16Fn):
    // x [N, C] (a norm output gathered under sequence parallelism, naive
    // attention's atty [N, Cl], the LM head's input), and dy [N, O] of the
    // widest block linear (qkv, proj, fc and gate, down), or of the LM head
    // (O = Vl).
    const int64_t widest = std::max({qkv_width_local(tp), C, Fl});
    t.push_back({"gemm_cast_x", {B, T, C}, DType::bf16});
    t.push_back({"gemm_cast_dy", {B, T, widest}, DType::bf16});
    t.push_back({"gemm_cast_head_x", {B, T, C}, DType::bf16, true});
    t.push_back({"gemm_cast_head_dy", {B, T, Vl}, DType::bf16, true});
  }
  if (o.cp > 1) {
    // Ring attention (model/ring_attention.h): the K/V block being used and
    // the one arriving, the same for their gradients in backward, and the
    // positions of every cp rank's local tokens.
    const int64_t kvw = 2 * kv_heads_local(tp) * cfg_.head_size();
    t.push_back({"ring_kv", {2, B, T, kvw}, d});
    t.push_back({"ring_dkv", {2, B, T, kvw}, d});
    t.push_back({"ring_positions", {o.cp, T}, DType::i32});
    if (o.gemm == DType::bf16 && o.flash_attention) {
      // The bf16 qkv and atty the block keeps, widened for the fp32 ring kernels in backward.
      t.push_back({"ring_qkv_f32", {B, T, qkv_width_local(tp)}, DType::f32});
      t.push_back({"ring_out_f32", {B, T, divide(C, tp)}, DType::f32});
    }
  }
  return t;
}

int64_t ModelSpec::tp_bytes_per_micro_batch(int64_t B, int64_t T, const ActivationOptions& o, int64_t layers,
                                            bool embedding, bool head) const {
  const int64_t p = o.tp;
  if (p == 1) return 0;
  const int64_t C = cfg_.hidden, N = B * T, S = N * C * 4;
  // Per-rank bytes of each collective, as comm/communicator.h counts them.
  const int64_t ar_full = 2 * (p - 1) * S / p;        // all-reduce of [N, C]
  const int64_t ag_rs = (p - 1) * (N / p) * C * 4;     // all-gather / reduce-scatter of [N/p, C] shards
  const int64_t ce = 2 * (p - 1) * (4 * N) / p + 2 * (p - 1) * (8 * N) / p;  // row max; sum + target logit
  int64_t bytes = 0;
  if (o.sequence_parallel) {
    // Forward: 2 sp_gather + 2 sp_scatter; backward: 2 sp_scatter (all-gather), 2 re-gathers of the
    // stored LayerNorm outputs (all-gather), 2 sp_gather (reduce-scatter). Recompute reruns the forward.
    // The norm outputs' gathers move bf16 under bf16 GEMMs (they are kept so).
    const bool full = o.recompute == Recompute::full;
    const int64_t norm_gather = o.gemm == DType::bf16 ? ag_rs / 2 : ag_rs;
    bytes += layers * ((full ? 8 : 6) * ag_rs + (full ? 6 : 4) * norm_gather);
    if (embedding) bytes += 2 * ag_rs;      // sp_scatter of the vocab-parallel lookup, and its backward
    if (head) bytes += 2 * ag_rs + ce;      // sp_gather of LN_f (both directions) + the loss statistics
  } else {
    // Forward: 2 tp_reduce; backward: 2 tp_copy.
    bytes += layers * (o.recompute == Recompute::full ? 6 : 4) * ar_full;  // recompute reruns the forward
    if (embedding) bytes += ar_full;        // tp_reduce of the vocab-parallel lookup
    if (head) bytes += ar_full + ce;        // tp_copy backward of LN_f's output + the loss statistics
  }
  return bytes;
}

int64_t table_bytes(const std::vector<BufferInfo>& table) {
  int64_t n = 0;
  for (const auto& b : table) n += round_up(b.bytes(), ArenaLayout::kAlignFloats * 4);
  return n;
}

}  // namespace tera
