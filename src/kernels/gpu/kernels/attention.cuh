// Causal self-attention in the kernel dialect, naive and flash, in scalar
// form: one thread per query row (forward and the query gradient) or per key
// row (the key and value gradients), so every sum is added by one thread in a
// fixed order (deterministic, no atomics). The arithmetic is that of
// kernels/cpu/attention.cpp (ops.h has the layout: qkv[B,T,(H+2KV)*hs], query
// head h reads key/value head h / (H/KV), scale 1/sqrt(hs)):
//   naive forward:  scores into probs[B,H,T,T], softmax in place, y = P v;
//   flash forward:  the keys walked once with an online softmax (running
//                   max m and sum l, the output rescaled by exp(m_old - m));
//                   lse = m + log l saved, no T x T matrix;
//   backward:       dq_t = scale sum_s P (dP - D_t) k_s with D_t = rowsum(P dP)
//                   (naive, from probs) or dout_t . y_t (flash, P recomputed
//                   as exp(scale q.k - lse)); dk_s, dv_s from the key side.
// Accumulators live in the output rows each thread owns (no per-thread
// arrays, no head-size limit). The bf16 flash kernels' tensor-core form is
// flash_attention_tc.cuh (ops_launch.h picks it where the shape allows).
//
// The bf16 flash kernels (train.precision = "bf16", the _bf16_k entry
// points: qkv and the output the backward reads stored in bf16) round the
// operands of every product to bf16 as kernels/cpu/flash_attention.cpp
// does: q, k, v (bf16 already) and dout, P before it multiplies v or dout,
// dS before it multiplies k or q; sums, the softmax statistics, lse and D stay fp32. The forward walks
// the keys in tiles of kAttnKeyTile with the running max updated once per
// tile (the CPU kernel's tiles), so P = exp(s - m) is rounded at the same m.
#pragma once

#include "kernels/gpu/dialect.h"
#include "kernels/gpu/kernels/elementwise.cuh"

TERA_GPU_BEGIN

struct AttnShape {
  int64_t B, T, H, KV, hs;
  TERA_HOST_DEVICE int64_t width() const { return (H + 2 * KV) * hs; }
  TERA_HOST_DEVICE int64_t group() const { return H / KV; }
  TERA_HOST_DEVICE int64_t q(int64_t h) const { return h * hs; }
  TERA_HOST_DEVICE int64_t k(int64_t g) const { return (H + g) * hs; }
  TERA_HOST_DEVICE int64_t v(int64_t g) const { return (H + KV + g) * hs; }
};

// a . b over fp32 or bf16 storage (load_f32), fp32 sums.
template <typename A, typename B>
TERA_DEVICE float dot_n(const A* a, const B* b, int64_t n) {
  float s = 0.0f;
  for (int64_t i = 0; i < n; ++i) s += load_f32(a, i) * load_f32(b, i);
  return s;
}

// x, or x rounded to bf16 (nearest even) when bf16.
TERA_DEVICE float bf16_if(float x, bool bf16) { return bf16 ? bf16_to_float(float_to_bf16(x)) : x; }

// a . b with each operand rounded as bf16_if does, fp32 sums.
template <typename A, typename B>
TERA_DEVICE float dot_r(const A* a, const B* b, int64_t n, bool bf16) {
  if (!bf16) return dot_n(a, b, n);
  float s = 0.0f;
  for (int64_t i = 0; i < n; ++i) s += bf16_if(load_f32(a, i), true) * bf16_if(load_f32(b, i), true);
  return s;
}

constexpr int64_t kAttnKeyTile = 64;  // keys per online-softmax step (flash forward)

// One thread per (b, h, t). probs != null: naive (probs written); else
// flash (lse[B,H,T] written). Qkv: the storage of qkv (float; bf16 as
// uint16_t for the bf16 flash kernels).
template <typename Qkv>
TERA_DEVICE void attention_forward_body(float* out, float* probs, float* lse, const Qkv* qkv, AttnShape a,
                                        float scale, bool bf16) {
  const int64_t rows = a.B * a.H * a.T, W = a.width(), C = a.H * a.hs;
  for (int64_t r = grid_first(); r < rows; r += grid_stride()) {
    const int64_t t = r % a.T, h = (r / a.T) % a.H, b = r / (a.T * a.H);
    const int64_t g = h / a.group();
    const Qkv* base = qkv + b * a.T * W;
    const Qkv* q = base + t * W + a.q(h);
    float* y = out + (b * a.T + t) * C + h * a.hs;
    for (int64_t i = 0; i < a.hs; ++i) y[i] = 0.0f;
    if (probs != nullptr) {
      float* prow = probs + ((b * a.H + h) * a.T + t) * a.T;
      float mx = -INFINITY;
      for (int64_t s = 0; s <= t; ++s) {
        prow[s] = dot_n(q, base + s * W + a.k(g), a.hs) * scale;
        mx = prow[s] > mx ? prow[s] : mx;
      }
      float sum = 0.0f;
      for (int64_t s = 0; s <= t; ++s) {
        prow[s] = expf(prow[s] - mx);
        sum += prow[s];
      }
      const float inv = 1.0f / sum;
      for (int64_t s = 0; s <= t; ++s) prow[s] *= inv;
      for (int64_t s = t + 1; s < a.T; ++s) prow[s] = 0.0f;
      for (int64_t s = 0; s <= t; ++s) {
        const Qkv* v = base + s * W + a.v(g);
        for (int64_t i = 0; i < a.hs; ++i) y[i] += prow[s] * load_f32(v, i);
      }
    } else {
      float m = -INFINITY, l = 0.0f;
      for (int64_t s0 = 0; s0 <= t; s0 += kAttnKeyTile) {
        const int64_t s1 = t + 1 < s0 + kAttnKeyTile ? t + 1 : s0 + kAttnKeyTile;
        float m_new = m;
        for (int64_t s = s0; s < s1; ++s) {
          const float sc = dot_r(q, base + s * W + a.k(g), a.hs, bf16) * scale;
          m_new = sc > m_new ? sc : m_new;
        }
        const float alpha = expf(m - m_new);
        for (int64_t i = 0; i < a.hs; ++i) y[i] *= alpha;
        l *= alpha;
        for (int64_t s = s0; s < s1; ++s) {
          const float p = expf(dot_r(q, base + s * W + a.k(g), a.hs, bf16) * scale - m_new);
          const float pr = bf16_if(p, bf16);
          const Qkv* v = base + s * W + a.v(g);
          for (int64_t i = 0; i < a.hs; ++i) y[i] += pr * bf16_if(load_f32(v, i), bf16);
          l += p;
        }
        m = m_new;
      }
      const float inv = 1.0f / l;
      for (int64_t i = 0; i < a.hs; ++i) y[i] *= inv;
      lse[(b * a.H + h) * a.T + t] = m + logf(l);
    }
  }
}
TERA_KERNEL attention_forward_k(float* out, float* probs, float* lse, const float* qkv, AttnShape a, float scale) {
  attention_forward_body(out, probs, lse, qkv, a, scale, false);
}
TERA_KERNEL flash_attention_forward_bf16_k(float* out, float* lse, const uint16_t* qkv, AttnShape a, float scale) {
  attention_forward_body(out, static_cast<float*>(nullptr), lse, qkv, a, scale, true);
}

// P[t, s] from the saved probabilities or recomputed from lse.
template <typename Qkv>
TERA_DEVICE float attention_p(const float* probs, const float* lse, const Qkv* base, AttnShape a, int64_t b,
                              int64_t h, int64_t t, int64_t s, float scale, bool bf16) {
  if (probs != nullptr) return probs[((b * a.H + h) * a.T + t) * a.T + s];
  const int64_t W = a.width(), g = h / a.group();
  const float sc = dot_r(base + t * W + a.q(h), base + s * W + a.k(g), a.hs, bf16) * scale;
  return expf(sc - lse[(b * a.H + h) * a.T + t]);
}

// The query side, one thread per (b, h, t): D[b,h,t] (naive: sum_s P dP;
// flash: dout_t . y_t) and dq (overwritten).
template <typename Qkv>
TERA_DEVICE void attention_backward_q_body(float* dqkv, float* D, const float* dout, const Qkv* qkv, const Qkv* out,
                                           const float* probs, const float* lse, AttnShape a, float scale, bool bf16) {
  const int64_t rows = a.B * a.H * a.T, W = a.width(), C = a.H * a.hs;
  for (int64_t r = grid_first(); r < rows; r += grid_stride()) {
    const int64_t t = r % a.T, h = (r / a.T) % a.H, b = r / (a.T * a.H);
    const int64_t g = h / a.group();
    const Qkv* base = qkv + b * a.T * W;
    const float* dy = dout + (b * a.T + t) * C + h * a.hs;
    float d = 0.0f;
    if (probs != nullptr) {
      for (int64_t s = 0; s <= t; ++s) {
        d += attention_p(probs, lse, base, a, b, h, t, s, scale, false) * dot_n(dy, base + s * W + a.v(g), a.hs);
      }
    } else {
      d = dot_n(dy, out + (b * a.T + t) * C + h * a.hs, a.hs);
    }
    D[(b * a.H + h) * a.T + t] = d;
    float* dq = dqkv + (b * a.T + t) * W + a.q(h);
    for (int64_t i = 0; i < a.hs; ++i) dq[i] = 0.0f;
    for (int64_t s = 0; s <= t; ++s) {
      const float p = attention_p(probs, lse, base, a, b, h, t, s, scale, bf16);
      const float ds = bf16_if(p * (dot_r(dy, base + s * W + a.v(g), a.hs, bf16) - d) * scale, bf16);
      const Qkv* k = base + s * W + a.k(g);
      for (int64_t i = 0; i < a.hs; ++i) dq[i] += ds * bf16_if(load_f32(k, i), bf16);
    }
  }
}
TERA_KERNEL attention_backward_q_k(float* dqkv, float* D, const float* dout, const float* qkv, const float* out,
                                   const float* probs, const float* lse, AttnShape a, float scale) {
  attention_backward_q_body(dqkv, D, dout, qkv, out, probs, lse, a, scale, false);
}
TERA_KERNEL flash_attention_backward_q_bf16_k(float* dqkv, float* D, const float* dout, const uint16_t* qkv,
                                              const uint16_t* out, const float* lse, AttnShape a, float scale) {
  attention_backward_q_body(dqkv, D, dout, qkv, out, static_cast<const float*>(nullptr), lse, a, scale, true);
}

// The key side, one thread per (b, g, s): dk_s and dv_s (overwritten) summed
// over the group's query heads and the queries t >= s, in that order.
template <typename Qkv>
TERA_DEVICE void attention_backward_kv_body(float* dqkv, const float* D, const float* dout, const Qkv* qkv,
                                            const float* probs, const float* lse, AttnShape a, float scale, bool bf16) {
  const int64_t rows = a.B * a.KV * a.T, W = a.width(), C = a.H * a.hs;
  for (int64_t r = grid_first(); r < rows; r += grid_stride()) {
    const int64_t s = r % a.T, g = (r / a.T) % a.KV, b = r / (a.T * a.KV);
    const Qkv* base = qkv + b * a.T * W;
    float* dk = dqkv + (b * a.T + s) * W + a.k(g);
    float* dv = dqkv + (b * a.T + s) * W + a.v(g);
    for (int64_t i = 0; i < a.hs; ++i) {
      dk[i] = 0.0f;
      dv[i] = 0.0f;
    }
    const Qkv* v = base + s * W + a.v(g);
    for (int64_t h = g * a.group(); h < (g + 1) * a.group(); ++h) {
      for (int64_t t = s; t < a.T; ++t) {
        const float p = attention_p(probs, lse, base, a, b, h, t, s, scale, bf16);
        const float* dy = dout + (b * a.T + t) * C + h * a.hs;
        const float ds = bf16_if(p * (dot_r(dy, v, a.hs, bf16) - D[(b * a.H + h) * a.T + t]) * scale, bf16);
        const Qkv* q = base + t * W + a.q(h);
        const float pr = bf16_if(p, bf16);
        for (int64_t i = 0; i < a.hs; ++i) {
          dk[i] += ds * bf16_if(load_f32(q, i), bf16);
          dv[i] += pr * bf16_if(dy[i], bf16);
        }
      }
    }
  }
}
TERA_KERNEL attention_backward_kv_k(float* dqkv, const float* D, const float* dout, const float* qkv,
                                    const float* probs, const float* lse, AttnShape a, float scale) {
  attention_backward_kv_body(dqkv, D, dout, qkv, probs, lse, a, scale, false);
}
TERA_KERNEL flash_attention_backward_kv_bf16_k(float* dqkv, const float* D, const float* dout, const uint16_t* qkv,
                                               const float* lse, AttnShape a, float scale) {
  attention_backward_kv_body(dqkv, D, dout, qkv, static_cast<const float*>(nullptr), lse, a, scale, true);
}

TERA_GPU_END
