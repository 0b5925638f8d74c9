// Flash attention of local queries against one K/V block (ops.h
// FlashAttentionBlock*Fn, ring attention's building block), fp32, in the
// scalar form of attention.cuh: one thread per query row (forward, dq) or
// per key row (dk, dv), so every sum is added by one thread in a fixed order
// (deterministic, no atomics). kernels/cpu/flash_attention_block.cpp is the
// twin, with the same arithmetic: query t sees key s iff pos_k[s] <=
// pos_q[t]; the forward continues the online softmax from the row's (out,
// lse) when accumulating (lse as the running max with a running sum of 1,
// out as the accumulator), so the log-sum-exp merge is its last step; a row
// at lse = -inf starts from nothing (out zeroed at the first key it sees), a
// key tile the row sees none of is skipped (no exp(-inf - -inf)), and a row
// that sees no key ends at lse = -inf with out = 0 (accumulate = false) or
// out as it was (true). The backward adds (dq into dqkv's q part, dk and dv
// into dkv) with P = exp(scale q.k - lse) and D = dout . out of the final
// lse and out; rows at lse = -inf add nothing.
#pragma once

#include "kernels/gpu/dialect.h"
#include "kernels/gpu/kernels/attention.cuh"

TERA_GPU_BEGIN

// qkv[B,Tq,(H+2KV)*hs] (the queries), kv[B,Tk,2*KV*hs] (the block).
struct BlockAttnShape {
  int64_t B, Tq, Tk, H, KV, hs;
  TERA_HOST_DEVICE int64_t width() const { return (H + 2 * KV) * hs; }
  TERA_HOST_DEVICE int64_t kv_width() const { return 2 * KV * hs; }
  TERA_HOST_DEVICE int64_t group() const { return H / KV; }
  TERA_HOST_DEVICE int64_t q(int64_t h) const { return h * hs; }
  TERA_HOST_DEVICE int64_t k(int64_t g) const { return g * hs; }
  TERA_HOST_DEVICE int64_t v(int64_t g) const { return (KV + g) * hs; }
};

// grid-stride over B * H * Tq rows, one thread each.
TERA_KERNEL flash_attention_block_forward_k(float* out, float* lse, const float* qkv, const float* kv,
                                            const int32_t* pos_q, const int32_t* pos_k, BlockAttnShape a, float scale,
                                            int accumulate) {
  const int64_t rows = a.B * a.H * a.Tq, W = a.width(), Wk = a.kv_width(), C = a.H * a.hs;
  for (int64_t r = grid_first(); r < rows; r += grid_stride()) {
    const int64_t t = r % a.Tq, h = (r / a.Tq) % a.H, b = r / (a.Tq * a.H), g = h / a.group();
    const float* q = qkv + (b * a.Tq + t) * W + a.q(h);
    const float* K = kv + b * a.Tk * Wk + a.k(g);
    const float* V = kv + b * a.Tk * Wk + a.v(g);
    float* y = out + (b * a.Tq + t) * C + h * a.hs;
    float* ls = lse + (b * a.H + h) * a.Tq + t;
    const int32_t pos = pos_q[t];
    float m = -INFINITY, l = 0.0f;
    if (accumulate != 0 && *ls != -INFINITY) {
      m = *ls;
      l = 1.0f;
    }
    for (int64_t s0 = 0; s0 < a.Tk; s0 += kAttnKeyTile) {
      const int64_t s1 = a.Tk < s0 + kAttnKeyTile ? a.Tk : s0 + kAttnKeyTile;
      float mx = -INFINITY;
      for (int64_t s = s0; s < s1; ++s) {
        if (pos_k[s] > pos) continue;
        const float sc = dot_n(q, K + s * Wk, a.hs) * scale;
        mx = sc > mx ? sc : mx;
      }
      if (mx == -INFINITY) continue;  // the row sees no key of this tile
      mx = m > mx ? m : mx;
      const float corr = m == -INFINITY ? 0.0f : expf(m - mx);
      for (int64_t i = 0; i < a.hs; ++i) y[i] = m == -INFINITY ? 0.0f : y[i] * corr;  // the first key: y held nothing
      l *= corr;
      for (int64_t s = s0; s < s1; ++s) {
        if (pos_k[s] > pos) continue;
        const float p = expf(dot_n(q, K + s * Wk, a.hs) * scale - mx);
        const float* v = V + s * Wk;
        for (int64_t i = 0; i < a.hs; ++i) y[i] += p * v[i];
        l += p;
      }
      m = mx;
    }
    if (l == 0.0f) {  // no key seen, in this block or before: out = 0 of its own, or as it was
      if (accumulate == 0) {
        for (int64_t i = 0; i < a.hs; ++i) y[i] = 0.0f;
      }
      *ls = -INFINITY;
      continue;
    }
    const float inv = 1.0f / l;
    for (int64_t i = 0; i < a.hs; ++i) y[i] *= inv;
    *ls = m + logf(l);
  }
}

// The query side, one thread per (b, h, t): D[b,h,t] = dout_t . out_t
// (scratch, for the key side) and dq += scale sum_s P (dP - D) k_s.
TERA_KERNEL flash_attention_block_backward_q_k(float* dqkv, float* D, const float* dout, const float* qkv,
                                               const float* kv, const float* out, const float* lse,
                                               const int32_t* pos_q, const int32_t* pos_k, BlockAttnShape a,
                                               float scale) {
  const int64_t rows = a.B * a.H * a.Tq, W = a.width(), Wk = a.kv_width(), C = a.H * a.hs;
  for (int64_t r = grid_first(); r < rows; r += grid_stride()) {
    const int64_t t = r % a.Tq, h = (r / a.Tq) % a.H, b = r / (a.Tq * a.H), g = h / a.group();
    const float* dy = dout + (b * a.Tq + t) * C + h * a.hs;
    const float d = dot_n(dy, out + (b * a.Tq + t) * C + h * a.hs, a.hs);
    const int64_t row = (b * a.H + h) * a.Tq + t;
    D[row] = d;
    const float l = lse[row];
    if (l == -INFINITY) continue;
    const float* q = qkv + (b * a.Tq + t) * W + a.q(h);
    const float* kb = kv + b * a.Tk * Wk;
    float* dq = dqkv + (b * a.Tq + t) * W + a.q(h);
    for (int64_t s = 0; s < a.Tk; ++s) {
      if (pos_k[s] > pos_q[t]) continue;
      const float* k = kb + s * Wk + a.k(g);
      const float p = expf(dot_n(q, k, a.hs) * scale - l);
      const float ds = p * (dot_n(dy, kb + s * Wk + a.v(g), a.hs) - d) * scale;
      for (int64_t i = 0; i < a.hs; ++i) dq[i] += ds * k[i];
    }
  }
}

// The key side, one thread per (b, g, s): dk_s and dv_s added to, summed
// over the group's query heads and the queries that see key s, in that order.
TERA_KERNEL flash_attention_block_backward_kv_k(float* dkv, const float* D, const float* dout, const float* qkv,
                                                const float* kv, const float* lse, const int32_t* pos_q,
                                                const int32_t* pos_k, BlockAttnShape a, float scale) {
  const int64_t rows = a.B * a.KV * a.Tk, W = a.width(), Wk = a.kv_width(), C = a.H * a.hs;
  for (int64_t r = grid_first(); r < rows; r += grid_stride()) {
    const int64_t s = r % a.Tk, g = (r / a.Tk) % a.KV, b = r / (a.Tk * a.KV);
    const float* k = kv + (b * a.Tk + s) * Wk + a.k(g);
    const float* v = kv + (b * a.Tk + s) * Wk + a.v(g);
    float* dk = dkv + (b * a.Tk + s) * Wk + a.k(g);
    float* dv = dkv + (b * a.Tk + s) * Wk + a.v(g);
    for (int64_t h = g * a.group(); h < (g + 1) * a.group(); ++h) {
      for (int64_t t = 0; t < a.Tq; ++t) {
        const int64_t row = (b * a.H + h) * a.Tq + t;
        if (pos_k[s] > pos_q[t] || lse[row] == -INFINITY) continue;
        const float* q = qkv + (b * a.Tq + t) * W + a.q(h);
        const float* dy = dout + (b * a.Tq + t) * C + h * a.hs;
        const float p = expf(dot_n(q, k, a.hs) * scale - lse[row]);
        const float ds = p * (dot_n(dy, v, a.hs) - D[row]) * scale;
        for (int64_t i = 0; i < a.hs; ++i) {
          dk[i] += ds * q[i];
          dv[i] += p * dy[i];
        }
      }
    }
  }
}

TERA_GPU_END
