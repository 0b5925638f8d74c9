// GPT-2 forward and backward on one process (single stage, tp = 1). The
// block math and the head's eager backward are documented in gpt.h; the
// accumulation contract of each op is in kernels/ops.h.
#include "model/gpt.h"

#include <cstring>
#include <string>

#include "core/check.h"

namespace tera {

namespace {

ArenaLayout activation_layout(const ModelSpec& spec, int64_t B) {
  const int64_t T = spec.config().seq_len;
  ArenaLayout layout;
  // Every buffer is 4-byte elements here (fp32 activations, int32 token ids).
  for (const auto& b : spec.head_activations(B, T)) layout.add("head." + b.name, b.bytes() / 4);
  for (int64_t l = 0; l < spec.config().layers; ++l) {
    for (const auto& b : spec.block_activations(B, T)) layout.add("h." + std::to_string(l) + "." + b.name, b.bytes() / 4);
  }
  return layout;
}

ArenaLayout workspace_layout(const ModelSpec& spec, int64_t B) {
  ArenaLayout layout;
  for (const auto& b : spec.workspace(B, spec.config().seq_len)) layout.add(b.name, b.bytes() / 4);
  return layout;
}

}  // namespace

Gpt::Gpt(const ModelSpec& spec, const Backend& backend, int64_t max_batch)
    : spec_(spec), be_(backend), max_batch_(max_batch), table_(spec_) {
  TERA_ASSERT(max_batch > 0);
  params_ = Arena(table_.layout());
  grads_ = Arena(table_.layout());
  const ArenaLayout acts = activation_layout(spec_, max_batch_);
  const ArenaLayout work = workspace_layout(spec_, max_batch_);
  acts_ = Arena(acts);
  work_ = Arena(work);

  // Pointers, in the order the layouts were built.
  const auto& ae = acts.entries();
  size_t i = 0;
  auto next = [&]() { return acts_.at(ae[i++].offset); };
  head_.tokens = reinterpret_cast<int32_t*>(next());
  head_.targets = reinterpret_cast<int32_t*>(next());
  head_.embed_out = next();
  head_.losses = next();
  head_.dx_head = next();
  blocks_.resize(static_cast<size_t>(spec_.config().layers));
  for (auto& b : blocks_) {
    b.ln1 = next(); b.ln1_mean = next(); b.ln1_rstd = next(); b.qkv = next(); b.probs = next();
    b.atty = next(); b.res1 = next(); b.ln2 = next(); b.ln2_mean = next(); b.ln2_rstd = next();
    b.fch = next(); b.fch_gelu = next(); b.out = next();
  }
  TERA_ASSERT(i == ae.size());
  const auto& we = work.entries();
  ws_.lnf = work_.at(we[0].offset);
  ws_.lnf_mean = work_.at(we[1].offset);
  ws_.lnf_rstd = work_.at(we[2].offset);
  ws_.logits = work_.at(we[3].offset);
  ws_.dres = work_.at(we[4].offset);
  ws_.dwide = work_.at(we[5].offset);
  ws_.dnarrow = work_.at(we[6].offset);
  TERA_ASSERT(we.size() == 7);

  wte_ = params_.at(table_.at("wte.weight").offset);
  wpe_ = params_.at(table_.at("wpe.weight").offset);
  lnf_g_ = params_.at(table_.at("ln_f.weight").offset);
  lnf_b_ = params_.at(table_.at("ln_f.bias").offset);
  dwte_ = grads_.at(table_.at("wte.weight").offset);
  dwpe_ = grads_.at(table_.at("wpe.weight").offset);
  dlnf_g_ = grads_.at(table_.at("ln_f.weight").offset);
  dlnf_b_ = grads_.at(table_.at("ln_f.bias").offset);
}

Gpt::BlockWeights Gpt::block_weights(float* base, int64_t layer) const {
  const std::string p = "h." + std::to_string(layer) + ".";
  auto at = [&](const char* n) { return base + table_.at(p + n).offset; };
  return BlockWeights{at("ln_1.weight"),       at("ln_1.bias"),      at("attn.c_attn.weight"),
                      at("attn.c_attn.bias"),  at("attn.c_proj.weight"), at("attn.c_proj.bias"),
                      at("ln_2.weight"),       at("ln_2.bias"),      at("mlp.c_fc.weight"),
                      at("mlp.c_fc.bias"),     at("mlp.c_proj.weight"), at("mlp.c_proj.bias")};
}

void Gpt::init_parameters(uint64_t seed) { tera::init_parameters(table_, params_.base(), seed); }

void Gpt::zero_grads() { std::memset(grads_.base(), 0, static_cast<size_t>(grads_.bytes())); }

const float* Gpt::block_input(int64_t l) const { return l == 0 ? head_.embed_out : blocks_[static_cast<size_t>(l - 1)].out; }

void Gpt::embed_forward(int64_t B, int64_t T) {
  be_.embedding_forward(head_.embed_out, head_.tokens, wte_, wpe_, B, T, spec_.config().hidden);
}

void Gpt::block_forward(int64_t l, const float* x, int64_t B, int64_t T) {
  const int64_t C = spec_.config().hidden, H = spec_.config().heads, F = spec_.config().ffn(), N = B * T;
  const BlockWeights w = block_weights(params_.base(), l);
  BlockActs& a = blocks_[static_cast<size_t>(l)];
  be_.layernorm_forward(a.ln1, a.ln1_mean, a.ln1_rstd, x, w.ln1_g, w.ln1_b, N, C);
  be_.linear_forward(a.qkv, a.ln1, w.qkv_w, w.qkv_b, N, C, 3 * C);
  be_.attention_forward(a.atty, a.probs, a.qkv, B, T, C, H);
  be_.linear_forward(a.res1, a.atty, w.proj_w, w.proj_b, N, C, C);
  be_.residual_forward(a.res1, a.res1, x, N * C);
  be_.layernorm_forward(a.ln2, a.ln2_mean, a.ln2_rstd, a.res1, w.ln2_g, w.ln2_b, N, C);
  be_.linear_forward(a.fch, a.ln2, w.fc_w, w.fc_b, N, C, F);
  be_.gelu_forward(a.fch_gelu, a.fch, N * F);
  be_.linear_forward(a.out, a.fch_gelu, w.fcp_w, w.fcp_b, N, F, C);
  be_.residual_forward(a.out, a.out, a.res1, N * C);
}

void Gpt::block_backward(int64_t l, const float* x, float* dres, int64_t B, int64_t T) {
  const int64_t C = spec_.config().hidden, H = spec_.config().heads, F = spec_.config().ffn(), N = B * T;
  const BlockWeights w = block_weights(params_.base(), l);
  const BlockWeights g = block_weights(grads_.base(), l);
  const BlockActs& a = blocks_[static_cast<size_t>(l)];
  float* dwide = ws_.dwide;      // [N, max(F, 3C)]
  float* dnarrow = ws_.dnarrow;  // [N, C]
  // MLP: out = res1 + gelu(fch) @ Wfp^T + b; dres = d(out) = d(res1) through the skip.
  be_.linear_backward(dwide, g.fcp_w, g.fcp_b, dres, a.fch_gelu, w.fcp_w, N, F, C);
  be_.gelu_backward(dwide, a.fch, dwide, N * F);
  be_.linear_backward(dnarrow, g.fc_w, g.fc_b, dwide, a.ln2, w.fc_w, N, C, F);
  be_.layernorm_backward(dres, g.ln2_g, g.ln2_b, dnarrow, a.res1, w.ln2_g, a.ln2_mean, a.ln2_rstd, N, C);
  // Attention: res1 = x + atty @ Wo^T + b; dres now holds d(res1) = d(x) through the skip.
  be_.linear_backward(dnarrow, g.proj_w, g.proj_b, dres, a.atty, w.proj_w, N, C, C);
  be_.attention_backward(dwide, dnarrow, a.qkv, a.probs, B, T, C, H);
  be_.linear_backward(dnarrow, g.qkv_w, g.qkv_b, dwide, a.ln1, w.qkv_w, N, C, 3 * C);
  be_.layernorm_backward(dres, g.ln1_g, g.ln1_b, dnarrow, x, w.ln1_g, a.ln1_mean, a.ln1_rstd, N, C);
}

double Gpt::head_forward(const float* x, int64_t B, int64_t T, float dloss, bool backward) {
  const int64_t C = spec_.config().hidden, V = spec_.config().vocab, Vp = spec_.padded_vocab(), N = B * T;
  be_.layernorm_forward(ws_.lnf, ws_.lnf_mean, ws_.lnf_rstd, x, lnf_g_, lnf_b_, N, C);
  be_.linear_forward(ws_.logits, ws_.lnf, wte_, nullptr, N, C, Vp);
  be_.cross_entropy(head_.losses, ws_.logits, head_.targets, N, V, Vp, backward ? dloss : 0.0f);
  double sum = 0;
  for (int64_t i = 0; i < N; ++i) sum += head_.losses[i];
  if (backward) {
    // logits = lnf @ wte^T: d(lnf) = dlogits @ wte, d(wte) += dlogits^T @ lnf.
    be_.linear_backward(ws_.dnarrow, dwte_, nullptr, ws_.logits, ws_.lnf, wte_, N, C, Vp);
    std::memset(head_.dx_head, 0, static_cast<size_t>(N * C) * sizeof(float));
    be_.layernorm_backward(head_.dx_head, dlnf_g_, dlnf_b_, ws_.dnarrow, x, lnf_g_, ws_.lnf_mean, ws_.lnf_rstd, N, C);
  }
  return sum;
}

double Gpt::forward_backward(const int32_t* tokens, const int32_t* targets, int64_t B, int64_t T, float dloss) {
  TERA_ASSERT(B <= max_batch_ && T <= spec_.config().seq_len);
  const int64_t L = spec_.config().layers, C = spec_.config().hidden;
  std::memcpy(head_.tokens, tokens, static_cast<size_t>(B * T) * sizeof(int32_t));
  std::memcpy(head_.targets, targets, static_cast<size_t>(B * T) * sizeof(int32_t));
  embed_forward(B, T);
  for (int64_t l = 0; l < L; ++l) block_forward(l, block_input(l), B, T);
  const double loss = head_forward(block_input(L), B, T, dloss, /*backward=*/true);
  std::memcpy(ws_.dres, head_.dx_head, static_cast<size_t>(B * T * C) * sizeof(float));
  for (int64_t l = L - 1; l >= 0; --l) block_backward(l, block_input(l), ws_.dres, B, T);
  be_.embedding_backward(dwte_, dwpe_, ws_.dres, head_.tokens, B, T, C);
  return loss;
}

double Gpt::forward_loss(const int32_t* tokens, const int32_t* targets, int64_t B, int64_t T) {
  TERA_ASSERT(B <= max_batch_ && T <= spec_.config().seq_len);
  const int64_t L = spec_.config().layers;
  std::memcpy(head_.tokens, tokens, static_cast<size_t>(B * T) * sizeof(int32_t));
  std::memcpy(head_.targets, targets, static_cast<size_t>(B * T) * sizeof(int32_t));
  embed_forward(B, T);
  for (int64_t l = 0; l < L; ++l) block_forward(l, block_input(l), B, T);
  return head_forward(block_input(L), B, T, 0.0f, /*backward=*/false);
}

const float* Gpt::logits(const int32_t* tokens, int64_t B, int64_t T) {
  TERA_ASSERT(B <= max_batch_ && T <= spec_.config().seq_len);
  const int64_t L = spec_.config().layers, C = spec_.config().hidden, Vp = spec_.padded_vocab();
  std::memcpy(head_.tokens, tokens, static_cast<size_t>(B * T) * sizeof(int32_t));
  embed_forward(B, T);
  for (int64_t l = 0; l < L; ++l) block_forward(l, block_input(l), B, T);
  be_.layernorm_forward(ws_.lnf, ws_.lnf_mean, ws_.lnf_rstd, block_input(L), lnf_g_, lnf_b_, B * T, C);
  be_.linear_forward(ws_.logits, ws_.lnf, wte_, nullptr, B * T, C, Vp);
  return ws_.logits;
}

const float* Gpt::last_logits(const int32_t* tokens, int64_t T) {
  TERA_ASSERT(T >= 1 && T <= spec_.config().seq_len);
  const int64_t L = spec_.config().layers, C = spec_.config().hidden, Vp = spec_.padded_vocab();
  std::memcpy(head_.tokens, tokens, static_cast<size_t>(T) * sizeof(int32_t));
  embed_forward(1, T);
  for (int64_t l = 0; l < L; ++l) block_forward(l, block_input(l), 1, T);
  const float* x_last = block_input(L) + (T - 1) * C;
  be_.layernorm_forward(ws_.lnf, ws_.lnf_mean, ws_.lnf_rstd, x_last, lnf_g_, lnf_b_, 1, C);
  be_.linear_forward(ws_.logits, ws_.lnf, wte_, nullptr, 1, C, Vp);
  return ws_.logits;
}

MemoryReport Gpt::memory() const {
  MemoryReport r;
  r.params = params_.bytes();
  r.grads = grads_.bytes();
  r.activations = acts_.bytes();
  r.workspace = work_.bytes();
  return r;
}

}  // namespace tera
