// GptLayers: the embedding, the head and the pieces every layer is made of
// (norms, linear layers in either GEMM precision, the tensor-parallel
// pairs around them); the block itself is in gpt_block.cpp.
#include "model/gpt_layers.h"

#include <algorithm>
#include <string>

#include "core/check.h"

namespace tera {

LocalDims local_dims(const ModelSpec& spec, int64_t tp, int64_t tp_rank) {
  const ModelConfig& cfg = spec.config();
  LocalDims d;
  d.C = cfg.hidden;
  d.Cl = divide(cfg.hidden, tp);
  d.Hl = divide(cfg.heads, tp);
  d.KVl = spec.kv_heads_local(tp);
  d.hs = cfg.head_size();
  d.Ql = spec.qkv_width_local(tp);
  d.Fl = divide(cfg.ffn(), tp);
  d.Vl = spec.padded_vocab(tp) / tp;
  d.v0 = tp_rank * d.Vl;
  d.valid_vocab = std::clamp(cfg.vocab - d.v0, int64_t{0}, d.Vl);
  return d;
}

Workspace bind_workspace(const DeviceArena& arena) {
  Workspace ws;
  ws.lnf = arena.get<float>("lnf");
  ws.lnf_mean = arena.get<float>("lnf_mean");
  ws.lnf_rstd = arena.get<float>("lnf_rstd");
  ws.lnf_shard = arena.get<float>("lnf_shard");
  ws.logits = arena.get<float>("logits");
  ws.ce_stats = arena.get<float>("ce_stats");
  ws.dres = arena.get<float>("dres");
  ws.dwide = arena.get<float>("dwide");
  ws.dgate = arena.get<float>("dgate");
  ws.dnarrow = arena.get<float>("dnarrow");
  ws.full = arena.get<float>("full");
  ws.cast = {arena.get<uint16_t>("gemm_cast_x"), arena.get<uint16_t>("gemm_cast_dy")};
  ws.cast_head = {arena.get<uint16_t>("gemm_cast_head_x"), arena.get<uint16_t>("gemm_cast_head_dy")};
  ws.ring_qkv_f32 = arena.get<float>("ring_qkv_f32");
  ws.ring_out_f32 = arena.get<float>("ring_out_f32");
  return ws;
}

GptLayers::GptLayers(const ModelConfig& cfg, const Backend& be, TensorParallel& tp, const BlockPlan& plan,
                     const LocalDims& dims, const Workspace& ws, double* loss_sum, RingAttention* ring_attention)
    : be_(be),
      tp_(tp),
      plan_(plan),
      d_(dims),
      ws_(ws),
      loss_sum_(loss_sum),
      ring_(ring_attention),
      sp_(tp.sequence_parallel()),
      eps_(static_cast<float>(cfg.norm_eps)),
      rope_(cfg.rope()) {
  TERA_ASSERT(ws_.dres != nullptr && ws_.dwide != nullptr && ws_.dnarrow != nullptr, "the workspace plan lacks buffers");
  TERA_ASSERT(plan_.mlp != MlpPath::swiglu || ws_.dgate != nullptr, "the workspace plan lacks dgate (SwiGLU)");
  TERA_ASSERT(!sp_ || ws_.full != nullptr, "the workspace plan lacks the sequence-parallel buffers");
  TERA_ASSERT(plan_.gemm != DType::bf16 || (ws_.cast.x != nullptr && ws_.cast.dy != nullptr),
              "the workspace plan lacks the bf16 GEMM cast buffers");
  TERA_ASSERT(loss_sum_ != nullptr);
  TERA_ASSERT(ring() == (ring_ != nullptr), "ring attention is the block plan's choice, and needs its ring");
  TERA_ASSERT(plan_.attention != AttentionPath::ring_bf16 || (ws_.ring_qkv_f32 != nullptr && ws_.ring_out_f32 != nullptr),
              "the workspace plan lacks the ring's fp32 staging (cp with bf16 GEMMs)");
}

void GptLayers::norm_forward(TypedView out, float* mean, float* rstd, const float* x, const float* g, const float* b,
                             int64_t rows_) {
  const int64_t C = d_.C;
  const bool bf16 = out.dtype() == DType::bf16;
  switch (plan_.norm) {
    case NormKind::layernorm:
      if (bf16) {
        be_.layernorm_forward_bf16(out.bf16(), mean, rstd, x, g, b, rows_, C);
      } else {
        be_.layernorm_forward(out.f32(), mean, rstd, x, g, b, rows_, C);
      }
      break;
    case NormKind::rmsnorm:
      if (bf16) {
        be_.rmsnorm_forward_bf16(out.bf16(), rstd, x, g, rows_, C, eps_);
      } else {
        be_.rmsnorm_forward(out.f32(), rstd, x, g, rows_, C, eps_);
      }
      break;
  }
}

void GptLayers::norm_backward(float* dx, float* dg, float* db, const float* dout, const float* x, const float* g,
                              const float* mean, const float* rstd, int64_t rows_) {
  switch (plan_.norm) {
    case NormKind::layernorm: be_.layernorm_backward(dx, dg, db, dout, x, g, mean, rstd, rows_, d_.C); break;
    case NormKind::rmsnorm: be_.rmsnorm_backward(dx, dg, dout, x, g, rstd, rows_, d_.C); break;
  }
}

const uint16_t* GptLayers::bf16_input(ConstTypedView x, int64_t N, int64_t I, uint16_t* cast) {
  if (x.dtype() == DType::bf16) return x.bf16();
  TERA_ASSERT(x.f32() != nullptr && I <= d_.C, "an fp32 linear input wider than the cast buffer");
  be_.cast(cast, DType::bf16, x.f32(), DType::f32, N * I);
  return cast;
}

void GptLayers::linear_fwd(float* y, ConstTypedView x, const float* W, const uint16_t* Wb, const float* b, int64_t N,
                           int64_t I, int64_t O, const GemmCast& cast) {
  TERA_ASSERT((Wb != nullptr) == (plan_.gemm == DType::bf16), "a linear layer without the GEMM dtype's weights");
  if (plan_.gemm == DType::bf16) {
    be_.linear_forward_bf16(y, bf16_input(x, N, I, cast.x), Wb, b, N, I, O);
  } else {
    be_.linear_forward(y, x.f32(), W, b, N, I, O);  // f32() asserts: a bf16 input needs bf16 GEMMs
  }
}

void GptLayers::linear_bwd(float* dx, float* dW, float* db, const float* dy, ConstTypedView x, const float* W,
                           const uint16_t* Wb, int64_t N, int64_t I, int64_t O, bool accumulate_dx,
                           const GemmCast& cast) {
  // dx reads the weights; dW reads x (either may be skipped: the split backward).
  TERA_ASSERT(dx == nullptr || (Wb != nullptr) == (plan_.gemm == DType::bf16),
              "a linear layer without the GEMM dtype's weights");
  TERA_ASSERT(dW == nullptr || !x.empty(), "a linear layer's weight gradient without its input");
  if (plan_.gemm == DType::bf16) {
    const uint16_t* xb = dW == nullptr ? nullptr : bf16_input(x, N, I, cast.x);
    be_.linear_backward_bf16(dx, dW, db, dy, xb, Wb, N, I, O, accumulate_dx, cast.dy);
  } else {
    be_.linear_backward(dx, dW, db, dy, x.f32(), W, N, I, O, accumulate_dx);
  }
}

void GptLayers::keep(const TypedView& kept, const float* staged, int64_t n) {
  if (kept.dtype() == DType::bf16) be_.cast(kept.bf16(), DType::bf16, staged, DType::f32, n);
}

const float* GptLayers::gathered(const float* x_tokens, int64_t N) {
  if (!sp_) return x_tokens;
  tp_.gather_forward(x_tokens, ws_.full, rows(N) * d_.C);
  return ws_.full;
}

ConstTypedView GptLayers::norm_output(const TypedView& out, int64_t N) {
  if (out.dtype() == DType::f32) return ConstTypedView(gathered(out.f32(), N));
  if (!sp_) return out;
  tp_.gather_forward_bf16(out.bf16(), ws_.cast.x, rows(N) * d_.C);
  return ConstTypedView(static_cast<const uint16_t*>(ws_.cast.x));
}

void GptLayers::reduce_partial_sum(float* out, int64_t N) {
  if (sp_) {
    tp_.scatter_forward(ws_.full, out, rows(N) * d_.C);  // sp_scatter: reduce-scatter into this rank's token shard
  } else {
    tp_.reduce_forward(out, N * d_.C);  // tp_reduce: all-reduce in place
  }
}

const float* GptLayers::full_tokens(const float* d, int64_t N) {
  if (!sp_) return d;
  tp_.scatter_backward(d, ws_.full, rows(N) * d_.C);
  return ws_.full;
}

const float* GptLayers::reduce_input_grad(int64_t N) {
  if (!sp_) {
    tp_.copy_backward(ws_.dnarrow, N * d_.C);
    return ws_.dnarrow;
  }
  tp_.gather_backward(ws_.dnarrow, ws_.full, rows(N) * d_.C);
  return ws_.full;
}

void GptLayers::embed_forward(const IoWeights& w, float* x, const int32_t* tokens, int64_t B, int64_t T) {
  const int64_t C = d_.C, N = B * T;
  be_.embedding_lookup(partial_sum_buffer(x), tokens, w.wte, d_.v0, d_.v0 + d_.Vl, N, C);
  reduce_partial_sum(x, N);
  if (plan_.learned_positions) {  // GPT-2
    TERA_ASSERT(w.wpe != nullptr, "a GPT-2 embedding without its learned positions (wpe.weight)");
    positions_forward(x, w.wpe, N, T);
  }
}

// Under context parallelism the local tokens are runs of consecutive
// positions (partition/context_split.h): each run's rows of this rank (its
// sequence-parallel shard) take the run's slice of wpe.
void GptLayers::positions_forward(float* x, const float* wpe, int64_t N, int64_t T) {
  const int64_t C = d_.C, Nt = rows(N), n0 = first_token(N);
  if (!ring()) {
    be_.position_add(x, wpe, n0, Nt, T, C);
    return;
  }
  for (const auto& [row, position, length] : ring_rows(N, T)) {
    be_.position_add(x + (row - n0) * C, wpe + position * C, 0, length, length, C);
  }
}

void GptLayers::positions_backward(float* dwpe, const float* dres, int64_t N, int64_t T) {
  const int64_t C = d_.C, Nt = rows(N), n0 = first_token(N);
  if (!ring()) {
    be_.position_add_backward(dwpe, dres, n0, Nt, T, C);
    return;
  }
  for (const auto& [row, position, length] : ring_rows(N, T)) {
    be_.position_add_backward(dwpe + position * C, dres + (row - n0) * C, 0, length, length, C);
  }
}

std::vector<GptLayers::PositionRun> GptLayers::ring_rows(int64_t N, int64_t T) const {
  const int64_t n0 = first_token(N), n1 = n0 + rows(N);
  std::vector<PositionRun> out;
  for (int64_t b = 0; b < N / T; ++b) {
    for (const ContextSplit::Run& r : ring_->split().runs()) {
      const int64_t first = b * T + r.local_begin;
      const int64_t lo = std::max(first, n0), hi = std::min(first + r.length, n1);
      if (lo < hi) out.push_back({lo, r.position + (lo - first), hi - lo});
    }
  }
  return out;
}

void GptLayers::embed_backward(const IoWeights& g, const float* dres, const int32_t* tokens, int64_t B, int64_t T) {
  const int64_t C = d_.C, N = B * T, Nt = rows(N);
  if (plan_.learned_positions) {
    TERA_ASSERT(g.wpe != nullptr, "a GPT-2 embedding without the gradient of its learned positions");
    positions_backward(g.wpe, dres, N, T);
  }
  const float* dfull = dres;
  if (sp_) {
    tp_.scatter_backward(dres, ws_.full, Nt * C);  // sp_scatter backward: all-gather
    dfull = ws_.full;
  }
  be_.embedding_lookup_backward(g.wte, dfull, tokens, d_.v0, d_.v0 + d_.Vl, N, C);
}

void GptLayers::head_loss(const IoWeights& w, const float* x, const int32_t* targets, float* losses, int64_t N,
                          float dloss, bool count_loss) {
  const int64_t C = d_.C, Nt = rows(N), Vl = d_.Vl, valid = d_.valid_vocab;
  float* lnf_tokens = sp_ ? ws_.lnf_shard : ws_.lnf;
  norm_forward(TypedView(lnf_tokens), ws_.lnf_mean, ws_.lnf_rstd, x, w.lnf_g, w.lnf_b, Nt);
  if (sp_) tp_.gather_forward(ws_.lnf_shard, ws_.lnf, Nt * C);
  // Vocab-parallel logits and loss: the max and the sums are reduced over the group.
  linear_fwd(ws_.logits, ConstTypedView(ws_.lnf), w.head, w.head_bf16, nullptr, N, C, Vl, ws_.cast_head);
  const CeStats ce = ws_.ce(N);
  be_.ce_max(ce.rowmax, ws_.logits, N, valid, Vl);
  tp_.all_max(ce.rowmax, N);
  be_.ce_exp_sum(ce.sums, ce.target_logit, ws_.logits, targets, ce.rowmax, N, valid, Vl, d_.v0);
  tp_.all_sum(ce.sums, 2 * N);  // the sums and the target logits
  be_.ce_finalize(losses, ws_.logits, targets, ce.rowmax, ce.sums, ce.target_logit, N, valid, Vl, d_.v0, dloss);
  if (count_loss) be_.accumulate_sum(loss_sum_, losses, N);  // the loss stays on the device
}

void GptLayers::head_backward(const IoWeights& w, const IoWeights& g, const float* x, float* dx, int64_t N) {
  const int64_t C = d_.C, Nt = rows(N);
  // logits = lnf @ head^T (head: the tied wte, or lm_head): d(lnf) = dlogits @ head (partial over
  // the vocab split), d(head) += dlogits^T @ lnf.
  linear_bwd(ws_.dnarrow, g.head, nullptr, ws_.logits, ConstTypedView(ws_.lnf), w.head, w.head_bf16, N, C, d_.Vl,
             false, ws_.cast_head);
  const float* dlnf = ws_.dnarrow;
  if (sp_) {
    tp_.gather_backward(ws_.dnarrow, ws_.lnf_shard, Nt * C);
    dlnf = ws_.lnf_shard;
  } else {
    tp_.copy_backward(ws_.dnarrow, N * C);
  }
  be_.fill(dx, DType::f32, 0.0, Nt * C);
  norm_backward(dx, g.lnf_g, g.lnf_b, dlnf, x, w.lnf_g, ws_.lnf_mean, ws_.lnf_rstd, Nt);
}

void GptLayers::head_logits(const IoWeights& w, const float* x, int64_t N) {
  norm_forward(TypedView(ws_.lnf), ws_.lnf_mean, ws_.lnf_rstd, x, w.lnf_g, w.lnf_b, N);
  linear_fwd(ws_.logits, ConstTypedView(ws_.lnf), w.head, w.head_bf16, nullptr, N, d_.C, d_.Vl, ws_.cast_head);
}

}  // namespace tera
