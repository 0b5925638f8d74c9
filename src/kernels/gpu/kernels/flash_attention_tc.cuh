// bf16 flash attention on the tile MMA primitive (kernels/gpu/mma.h): the
// tensor-core form of attention.cuh's bf16 flash kernels, with the same
// arithmetic (kernels/cpu/flash_attention.cpp is the twin): q, k, v in bf16;
// P = exp(scale q.k - m) rounded to bf16 before it multiplies v, with the
// running max m updated once per kFlashTcKeys keys; dout rounded to bf16
// before it multiplies v or meets P; dS rounded to bf16 before it multiplies
// k or q; products exact in fp32 (bf16 x bf16), every sum fp32. What changes
// against the scalar kernels is only the order of the fp32 sums (the tile
// primitive's), so the derived bounds of the conformance suite hold as they
// are.
//
// Every kernel is one warp per block and one block per 16 rows:
//   forward      16 query rows of one (b, h): S = Q K^T for 64 keys at a
//                time (Q and K read as tiles straight from qkv), the online
//                softmax by the lanes (warp / 16 lanes per row), O += P V
//                into the warp's O[16, hs] in shared memory; out = O / l,
//                lse = m + log l.
//   backward q   16 query rows of one (b, h): D = dout . out per row, then
//                per 64 keys S = Q K^T, dP = dout V^T, dS = P (dP - D)
//                scale, dQ += dS K.
//   backward kv  16 keys of one (b, kv head g): per head of the group and
//                per 32 queries, S^T = K Q^T, dP^T = V dout^T,
//                dV += P^T dout, dK += dS^T Q.
// Sums over keys (dq) and over queries (dk, dv) stay within one warp, so the
// kernels are deterministic without atomics, like the scalar ones.
//
// Shapes the kernels take (flash_tc_fits): T a multiple of 16 (every tile
// row is a real row: no padding reads past the sequence), hs a multiple of
// 16 up to kFlashTcMaxHead (the accumulators' shared arrays), qkv 32-byte
// aligned. Others run the scalar kernels.
#pragma once

#include "kernels/gpu/dialect.h"
#include "kernels/gpu/kernels/attention.cuh"
#include "kernels/gpu/mma.h"

TERA_GPU_BEGIN

constexpr int kFlashTcRows = 16;      // query (forward, dq) or key (dk, dv) rows per block
constexpr int kFlashTcKeys = 64;      // keys per step of the forward and of dq (kAttnKeyTile)
constexpr int kFlashTcQueries = 32;   // queries per step of dk, dv
constexpr int kFlashTcMaxHead = 128;  // the largest head size the accumulators hold
static_assert(kFlashTcKeys == kAttnKeyTile, "the running max moves once per key tile, as in the scalar kernel");

TERA_HOST_DEVICE bool flash_tc_fits(int64_t T, int64_t hs) {
  return T > 0 && T % kFlashTcRows == 0 && hs > 0 && hs % 16 == 0 && hs <= kFlashTcMaxHead;
}

// One lane group per tile row: lanes r * lpr .. r * lpr + lpr - 1 own row r
// (lpr = warp / 16: 2 on NVIDIA, 4 on AMD) and its columns sub, sub + lpr, ...
struct TileLane {
  int lpr, r, sub;
};
TERA_DEVICE TileLane tile_lane() {
  const int lpr = warp_size() / kFlashTcRows;
  return {lpr, lane_id() / lpr, lane_id() % lpr};
}
// The sum and the max over the lanes of one row (a full-warp exchange).
TERA_DEVICE float row_lanes_sum(float v, int lpr) {
  for (int m = 1; m < lpr; m *= 2) v += shfl_xor(v, m);
  return v;
}
TERA_DEVICE float row_lanes_max(float v, int lpr) {
  for (int m = 1; m < lpr; m *= 2) {
    const float o = shfl_xor(v, m);
    v = o > v ? o : v;
  }
  return v;
}

// S[16, 16 * tiles] (ld lds) = A[16, hs] B[16 * tiles, hs]^T, A and B rows
// of ld lda / ldb: zeroed, then accumulated over hs in 16-wide steps.
TERA_DEVICE void tile_products_bt(float* S, int lds, const uint16_t* A, int64_t lda, const uint16_t* B, int64_t ldb,
                                  int tiles, int64_t hs) {
  for (int e = lane_id(); e < kFlashTcRows * lds; e += warp_size()) S[e] = 0.0f;
  warp_sync();
  for (int c = 0; c < tiles; ++c) {
    for (int64_t d0 = 0; d0 < hs; d0 += 16) {
      mma_16x16x16_bf16_bt(S + c * 16, lds, A + d0, static_cast<int>(lda), B + c * 16 * ldb + d0, static_cast<int>(ldb));
    }
  }
  warp_sync();
}

// Acc[16, hs] (ld hs) += P[16, 16 * tiles] (ld ldp) B[16 * tiles, hs] (rows of ld ldb).
TERA_DEVICE void tile_accumulate(float* Acc, const uint16_t* P, int ldp, const uint16_t* B, int64_t ldb, int tiles,
                                 int64_t hs) {
  warp_sync();
  for (int64_t n0 = 0; n0 < hs; n0 += 16) {
    for (int c = 0; c < tiles; ++c) {
      mma_16x16x16_bf16(Acc + n0, static_cast<int>(hs), P + c * 16, ldp, B + c * 16 * ldb + n0, static_cast<int>(ldb));
    }
  }
  warp_sync();
}

// grid (T / 16, B * H), block: one warp.
TERA_KERNEL flash_attention_forward_tc_k(float* out, float* lse, const uint16_t* qkv, AttnShape a, float scale) {
  TERA_SHARED(float, S, kFlashTcRows * kFlashTcKeys);
  TERA_SHARED(uint16_t, P, kFlashTcRows * kFlashTcKeys);
  TERA_SHARED(float, O, kFlashTcRows * kFlashTcMaxHead);
  const TileLane L = tile_lane();
  const int64_t t0 = static_cast<int64_t>(block_x()) * kFlashTcRows, bh = block_y();
  const int64_t b = bh / a.H, h = bh % a.H, g = h / a.group(), W = a.width(), hs = a.hs, t = t0 + L.r;
  const uint16_t* base = qkv + b * a.T * W;
  for (int64_t e = lane_id(); e < kFlashTcRows * hs; e += warp_size()) O[e] = 0.0f;
  float m = -INFINITY, l = 0.0f;  // m: the row's; l: this lane's share of the row's sum
  for (int64_t s0 = 0; s0 < t0 + kFlashTcRows; s0 += kFlashTcKeys) {
    // Keys s0 .. s0 + nk - 1: every key some row of the tile sees (a multiple of 16).
    const int64_t nk = t0 + kFlashTcRows - s0 < kFlashTcKeys ? t0 + kFlashTcRows - s0 : kFlashTcKeys;
    const int tiles = static_cast<int>(nk / 16);
    tile_products_bt(S, kFlashTcKeys, base + t0 * W + a.q(h), W, base + s0 * W + a.k(g), W, tiles, hs);
    float* srow = S + L.r * kFlashTcKeys;
    uint16_t* prow = P + L.r * kFlashTcKeys;
    float m_new = m;
    for (int64_t j = L.sub; j < nk && s0 + j <= t; j += L.lpr) m_new = srow[j] * scale > m_new ? srow[j] * scale : m_new;
    m_new = row_lanes_max(m_new, L.lpr);
    const float alpha = expf(m - m_new);  // 0 on the first tile (m = -inf); every row sees key s0 <= t0
    l *= alpha;
    for (int64_t j = L.sub; j < kFlashTcKeys; j += L.lpr) {
      const float p = j < nk && s0 + j <= t ? expf(srow[j] * scale - m_new) : 0.0f;
      prow[j] = float_to_bf16(p);
      l += p;
    }
    for (int64_t i = L.sub; i < hs; i += L.lpr) O[L.r * hs + i] *= alpha;
    m = m_new;
    tile_accumulate(O, P, kFlashTcKeys, base + s0 * W + a.v(g), W, tiles, hs);
  }
  l = row_lanes_sum(l, L.lpr);
  const float inv = 1.0f / l;
  float* y = out + (b * a.T + t) * a.H * hs + h * hs;
  for (int64_t i = L.sub; i < hs; i += L.lpr) y[i] = O[L.r * hs + i] * inv;
  if (L.sub == 0) lse[(b * a.H + h) * a.T + t] = m + logf(l);
}

// grid (T / 16, B * H), block: one warp. D[B,H,T] and dq (overwritten).
TERA_KERNEL flash_attention_backward_q_tc_k(float* dqkv, float* D, const float* dout, const uint16_t* qkv,
                                            const uint16_t* out, const float* lse, AttnShape a, float scale) {
  TERA_SHARED(float, S, kFlashTcRows * kFlashTcKeys);
  TERA_SHARED(float, dP, kFlashTcRows * kFlashTcKeys);
  TERA_SHARED(uint16_t, dS, kFlashTcRows * kFlashTcKeys);
  TERA_SHARED(uint16_t, dY, kFlashTcRows * kFlashTcMaxHead);
  TERA_SHARED(float, dQ, kFlashTcRows * kFlashTcMaxHead);
  const TileLane L = tile_lane();
  const int64_t t0 = static_cast<int64_t>(block_x()) * kFlashTcRows, bh = block_y();
  const int64_t b = bh / a.H, h = bh % a.H, g = h / a.group(), W = a.width(), C = a.H * a.hs, hs = a.hs, t = t0 + L.r;
  const uint16_t* base = qkv + b * a.T * W;
  const float* dy = dout + (b * a.T + t) * C + h * hs;
  const uint16_t* y = out + (b * a.T + t) * C + h * hs;
  float d = 0.0f;
  for (int64_t i = L.sub; i < hs; i += L.lpr) {
    d += dy[i] * bf16_to_float(y[i]);
    dY[L.r * hs + i] = float_to_bf16(dy[i]);
    dQ[L.r * hs + i] = 0.0f;
  }
  d = row_lanes_sum(d, L.lpr);
  const int64_t row = (b * a.H + h) * a.T + t;
  if (L.sub == 0) D[row] = d;
  const float lse_t = lse[row];
  for (int64_t s0 = 0; s0 < t0 + kFlashTcRows; s0 += kFlashTcKeys) {
    const int64_t nk = t0 + kFlashTcRows - s0 < kFlashTcKeys ? t0 + kFlashTcRows - s0 : kFlashTcKeys;
    const int tiles = static_cast<int>(nk / 16);
    tile_products_bt(S, kFlashTcKeys, base + t0 * W + a.q(h), W, base + s0 * W + a.k(g), W, tiles, hs);
    tile_products_bt(dP, kFlashTcKeys, dY, hs, base + s0 * W + a.v(g), W, tiles, hs);
    for (int64_t j = L.sub; j < nk; j += L.lpr) {
      const int64_t e = L.r * kFlashTcKeys + j;
      const float p = s0 + j <= t ? expf(S[e] * scale - lse_t) : 0.0f;
      dS[e] = float_to_bf16(p * (dP[e] - d) * scale);
    }
    tile_accumulate(dQ, dS, kFlashTcKeys, base + s0 * W + a.k(g), W, tiles, hs);
  }
  float* dq = dqkv + (b * a.T + t) * W + a.q(h);
  for (int64_t i = L.sub; i < hs; i += L.lpr) dq[i] = dQ[L.r * hs + i];
}

// grid (T / 16, B * KV), block: one warp. dk and dv (overwritten) of 16 keys,
// summed over the group's query heads and the queries t >= s.
TERA_KERNEL flash_attention_backward_kv_tc_k(float* dqkv, const float* D, const float* dout, const uint16_t* qkv,
                                             const float* lse, AttnShape a, float scale) {
  TERA_SHARED(float, St, kFlashTcRows * kFlashTcQueries);
  TERA_SHARED(float, dPt, kFlashTcRows * kFlashTcQueries);
  TERA_SHARED(uint16_t, Pt, kFlashTcRows * kFlashTcQueries);
  TERA_SHARED(uint16_t, dSt, kFlashTcRows * kFlashTcQueries);
  TERA_SHARED(uint16_t, dY, kFlashTcQueries * kFlashTcMaxHead);
  TERA_SHARED(float, dK, kFlashTcRows * kFlashTcMaxHead);
  TERA_SHARED(float, dV, kFlashTcRows * kFlashTcMaxHead);
  const int64_t s0 = static_cast<int64_t>(block_x()) * kFlashTcRows, bg = block_y();
  const int64_t b = bg / a.KV, g = bg % a.KV, W = a.width(), C = a.H * a.hs, hs = a.hs;
  const uint16_t* base = qkv + b * a.T * W;
  for (int64_t e = lane_id(); e < kFlashTcRows * hs; e += warp_size()) {
    dK[e] = 0.0f;
    dV[e] = 0.0f;
  }
  for (int64_t h = g * a.group(); h < (g + 1) * a.group(); ++h) {
    for (int64_t t0 = s0; t0 < a.T; t0 += kFlashTcQueries) {
      // Queries t0 .. t0 + nq - 1 (a multiple of 16); the keys' rows s0 + r.
      const int64_t nq = a.T - t0 < kFlashTcQueries ? a.T - t0 : kFlashTcQueries;
      const int tiles = static_cast<int>(nq / 16);
      warp_sync();  // the previous step's tile_accumulate read dY
      for (int64_t e = lane_id(); e < nq * hs; e += warp_size()) {
        dY[e] = float_to_bf16(dout[(b * a.T + t0 + e / hs) * C + h * hs + e % hs]);
      }
      tile_products_bt(St, kFlashTcQueries, base + s0 * W + a.k(g), W, base + t0 * W + a.q(h), W, tiles, hs);
      tile_products_bt(dPt, kFlashTcQueries, base + s0 * W + a.v(g), W, dY, hs, tiles, hs);
      for (int64_t e = lane_id(); e < kFlashTcRows * kFlashTcQueries; e += warp_size()) {
        const int64_t r = e / kFlashTcQueries, j = e % kFlashTcQueries, s = s0 + r, t = t0 + j;
        const int64_t row = (b * a.H + h) * a.T + t;
        const float p = j < nq && t >= s ? expf(St[e] * scale - lse[row]) : 0.0f;
        Pt[e] = float_to_bf16(p);
        dSt[e] = float_to_bf16(j < nq ? p * (dPt[e] - D[row]) * scale : 0.0f);
      }
      tile_accumulate(dV, Pt, kFlashTcQueries, dY, hs, tiles, hs);
      tile_accumulate(dK, dSt, kFlashTcQueries, base + t0 * W + a.q(h), W, tiles, hs);
    }
  }
  for (int64_t e = lane_id(); e < kFlashTcRows * hs; e += warp_size()) {
    const int64_t s = s0 + e / hs, i = e % hs;
    dqkv[(b * a.T + s) * W + a.k(g) + i] = dK[e];
    dqkv[(b * a.T + s) * W + a.v(g) + i] = dV[e];
  }
}

TERA_GPU_END
