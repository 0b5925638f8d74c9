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
// Every kernel runs kFlashTcWarps warps per block, each warp on 16 rows;
// the tiles every warp of the block reads (keys and values in the forward
// and dq; queries and output gradients in dk, dv) are loaded into shared
// memory once per block, by all its threads, instead of by each warp from
// global memory:
//   forward      32 query rows of one (b, h): per 64 keys, the K tile
//                staged, S = Q K^T per warp, the online softmax by the lanes
//                (warp / 16 lanes per row), then the V tile staged and
//                O += P V into the warp's O[16, hs]; out = O / l,
//                lse = m + log l.
//   backward q   32 query rows of one (b, h): D = dout . out per row, then
//                per 32 keys the V tile staged for dP = dout V^T, the K tile
//                for S = Q K^T and dQ += dS K, dS = P (dP - D) scale.
//   backward kv  32 keys of one (b, kv head g): per head of the group and
//                per 16 queries, the Q and dout tiles staged; per warp
//                S^T = K Q^T, dP^T = V dout^T, dV += P^T dout, dK += dS^T Q.
// Each output row's sums run over the same 16-wide tiles in the same order
// as with one warp per block, so the results are those of that form, bit
// for bit. Sums over keys (dq) and over queries (dk, dv) stay within one
// warp, so the kernels are deterministic without atomics, like the scalar
// ones. Static shared memory stays under 48 KiB (CUDA's limit without
// opting in) at the largest head size.
//
// Shapes the kernels take (flash_tc_fits): T a multiple of 16 (every tile
// row is a real row: no padding reads past the sequence; a block's second
// warp idles when T is an odd multiple of 16), hs a multiple of 16 up to
// kFlashTcMaxHead (the accumulators' shared arrays), qkv 32-byte aligned.
// Others run the scalar kernels.
#pragma once

#include "kernels/gpu/dialect.h"
#include "kernels/gpu/kernels/attention.cuh"
#include "kernels/gpu/mma.h"

TERA_GPU_BEGIN

constexpr int kFlashTcRows = 16;      // query (forward, dq) or key (dk, dv) rows per warp
constexpr int kFlashTcWarps = 2;      // warps per block
constexpr int kFlashTcBlockRows = kFlashTcRows * kFlashTcWarps;
constexpr int kFlashTcKeys = 64;      // keys per step of the forward (kAttnKeyTile)
constexpr int kFlashTcBwdKeys = 32;   // keys per step of dq
constexpr int kFlashTcQueries = 16;   // queries per step of dk, dv
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

// tile[r, i] = src[r * ld + i] for rows r < rows, i < hs (bf16), by every
// thread of the block; the caller syncs the block before and after.
// (rows * hs <= 64 * 128: 32-bit indices.)
TERA_DEVICE void stage_rows(uint16_t* tile, const uint16_t* src, int64_t ld, int64_t rows, int64_t hs) {
  const int n = static_cast<int>(rows * hs), w = static_cast<int>(hs);
  for (int e = thread_x(); e < n; e += block_dim_x()) {
    const int r = e / w;
    tile[e] = src[r * ld + (e - r * w)];
  }
}
// The same from fp32 rows, rounded to bf16.
TERA_DEVICE void stage_rows(uint16_t* tile, const float* src, int64_t ld, int64_t rows, int64_t hs) {
  const int n = static_cast<int>(rows * hs), w = static_cast<int>(hs);
  for (int e = thread_x(); e < n; e += block_dim_x()) {
    const int r = e / w;
    tile[e] = float_to_bf16(src[r * ld + (e - r * w)]);
  }
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

// grid (ceil(T / 32), B * H), block: kFlashTcWarps warps.
TERA_KERNEL flash_attention_forward_tc_k(float* out, float* lse, const uint16_t* qkv, AttnShape a, float scale) {
  TERA_SHARED(float, S_all, kFlashTcWarps * kFlashTcRows * kFlashTcKeys);
  TERA_SHARED(uint16_t, P_all, kFlashTcWarps * kFlashTcRows * kFlashTcKeys);
  TERA_SHARED(float, O_all, kFlashTcWarps * kFlashTcRows * kFlashTcMaxHead);
  TERA_SHARED(uint16_t, KV, kFlashTcKeys * kFlashTcMaxHead);  // the K tile, then the V tile
  const TileLane L = tile_lane();
  const int64_t tb = static_cast<int64_t>(block_x()) * kFlashTcBlockRows, bh = block_y();
  const int64_t t0 = tb + static_cast<int64_t>(warp_id()) * kFlashTcRows;
  const int64_t b = bh / a.H, h = bh % a.H, g = h / a.group(), W = a.width(), hs = a.hs, t = t0 + L.r;
  const int64_t end = tb + kFlashTcBlockRows < a.T ? tb + kFlashTcBlockRows : a.T;  // the block's rows end here
  const bool active = t0 < a.T;
  float* S = S_all + warp_id() * kFlashTcRows * kFlashTcKeys;
  uint16_t* P = P_all + warp_id() * kFlashTcRows * kFlashTcKeys;
  float* O = O_all + warp_id() * kFlashTcRows * kFlashTcMaxHead;
  const uint16_t* base = qkv + b * a.T * W;
  for (int64_t e = lane_id(); e < kFlashTcRows * hs; e += warp_size()) O[e] = 0.0f;
  float m = -INFINITY, l = 0.0f;  // m: the row's; l: this lane's share of the row's sum
  for (int64_t s0 = 0; s0 < end; s0 += kFlashTcKeys) {
    const int64_t staged = end - s0 < kFlashTcKeys ? end - s0 : kFlashTcKeys;  // a multiple of 16
    // Keys s0 .. s0 + nk - 1: every key some row of the warp's tile sees (a multiple of 16).
    const int64_t nk = t0 + kFlashTcRows - s0 < kFlashTcKeys ? t0 + kFlashTcRows - s0 : kFlashTcKeys;
    const bool mine = active && nk > 0;
    const int tiles = static_cast<int>(nk / 16);
    block_sync();  // the previous V tile is no longer read
    stage_rows(KV, base + s0 * W + a.k(g), W, staged, hs);
    block_sync();
    if (mine) {
      tile_products_bt(S, kFlashTcKeys, base + t0 * W + a.q(h), W, KV, hs, tiles, hs);
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
    }
    block_sync();  // every warp is done with the K tile
    stage_rows(KV, base + s0 * W + a.v(g), W, staged, hs);
    block_sync();
    if (mine) tile_accumulate(O, P, kFlashTcKeys, KV, hs, tiles, hs);
  }
  if (!active) return;
  l = row_lanes_sum(l, L.lpr);
  const float inv = 1.0f / l;
  float* y = out + (b * a.T + t) * a.H * hs + h * hs;
  for (int64_t i = L.sub; i < hs; i += L.lpr) y[i] = O[L.r * hs + i] * inv;
  if (L.sub == 0) lse[(b * a.H + h) * a.T + t] = m + logf(l);
}

// grid (ceil(T / 32), B * H), block: kFlashTcWarps warps. D[B,H,T] and dq (overwritten).
TERA_KERNEL flash_attention_backward_q_tc_k(float* dqkv, float* D, const float* dout, const uint16_t* qkv,
                                            const uint16_t* out, const float* lse, AttnShape a, float scale) {
  TERA_SHARED(float, S_all, kFlashTcWarps * kFlashTcRows * kFlashTcBwdKeys);
  TERA_SHARED(float, dP_all, kFlashTcWarps * kFlashTcRows * kFlashTcBwdKeys);
  TERA_SHARED(uint16_t, dS_all, kFlashTcWarps * kFlashTcRows * kFlashTcBwdKeys);
  TERA_SHARED(uint16_t, dY_all, kFlashTcWarps * kFlashTcRows * kFlashTcMaxHead);
  TERA_SHARED(float, dQ_all, kFlashTcWarps * kFlashTcRows * kFlashTcMaxHead);
  TERA_SHARED(uint16_t, KV, kFlashTcBwdKeys * kFlashTcMaxHead);  // the V tile, then the K tile
  const TileLane L = tile_lane();
  const int64_t tb = static_cast<int64_t>(block_x()) * kFlashTcBlockRows, bh = block_y();
  const int64_t t0 = tb + static_cast<int64_t>(warp_id()) * kFlashTcRows;
  const int64_t b = bh / a.H, h = bh % a.H, g = h / a.group(), W = a.width(), C = a.H * a.hs, hs = a.hs, t = t0 + L.r;
  const int64_t end = tb + kFlashTcBlockRows < a.T ? tb + kFlashTcBlockRows : a.T;
  const bool active = t0 < a.T;
  const int w = warp_id();
  float* S = S_all + w * kFlashTcRows * kFlashTcBwdKeys;
  float* dP = dP_all + w * kFlashTcRows * kFlashTcBwdKeys;
  uint16_t* dS = dS_all + w * kFlashTcRows * kFlashTcBwdKeys;
  uint16_t* dY = dY_all + w * kFlashTcRows * kFlashTcMaxHead;
  float* dQ = dQ_all + w * kFlashTcRows * kFlashTcMaxHead;
  const uint16_t* base = qkv + b * a.T * W;
  float d = 0.0f, lse_t = 0.0f;
  if (active) {
    const float* dy = dout + (b * a.T + t) * C + h * hs;
    const uint16_t* y = out + (b * a.T + t) * C + h * hs;
    for (int64_t i = L.sub; i < hs; i += L.lpr) {
      d += dy[i] * bf16_to_float(y[i]);
      dY[L.r * hs + i] = float_to_bf16(dy[i]);
      dQ[L.r * hs + i] = 0.0f;
    }
    d = row_lanes_sum(d, L.lpr);
    const int64_t row = (b * a.H + h) * a.T + t;
    if (L.sub == 0) D[row] = d;
    lse_t = lse[row];
  }
  for (int64_t s0 = 0; s0 < end; s0 += kFlashTcBwdKeys) {
    const int64_t staged = end - s0 < kFlashTcBwdKeys ? end - s0 : kFlashTcBwdKeys;
    const int64_t nk = t0 + kFlashTcRows - s0 < kFlashTcBwdKeys ? t0 + kFlashTcRows - s0 : kFlashTcBwdKeys;
    const bool mine = active && nk > 0;
    const int tiles = static_cast<int>(nk / 16);
    block_sync();  // the previous K tile is no longer read
    stage_rows(KV, base + s0 * W + a.v(g), W, staged, hs);
    block_sync();
    if (mine) tile_products_bt(dP, kFlashTcBwdKeys, dY, hs, KV, hs, tiles, hs);
    block_sync();  // every warp is done with the V tile
    stage_rows(KV, base + s0 * W + a.k(g), W, staged, hs);
    block_sync();
    if (!mine) continue;
    tile_products_bt(S, kFlashTcBwdKeys, base + t0 * W + a.q(h), W, KV, hs, tiles, hs);
    for (int64_t j = L.sub; j < nk; j += L.lpr) {
      const int64_t e = L.r * kFlashTcBwdKeys + j;
      const float p = s0 + j <= t ? expf(S[e] * scale - lse_t) : 0.0f;
      dS[e] = float_to_bf16(p * (dP[e] - d) * scale);
    }
    tile_accumulate(dQ, dS, kFlashTcBwdKeys, KV, hs, tiles, hs);
  }
  if (!active) return;
  float* dq = dqkv + (b * a.T + t) * W + a.q(h);
  for (int64_t i = L.sub; i < hs; i += L.lpr) dq[i] = dQ[L.r * hs + i];
}

// grid (ceil(T / 32), B * KV), block: kFlashTcWarps warps. dk and dv
// (overwritten) of 32 keys, summed over the group's query heads and the
// queries t >= s.
TERA_KERNEL flash_attention_backward_kv_tc_k(float* dqkv, const float* D, const float* dout, const uint16_t* qkv,
                                             const float* lse, AttnShape a, float scale) {
  constexpr int kQ = kFlashTcQueries;
  TERA_SHARED(float, St_all, kFlashTcWarps * kFlashTcRows * kQ);
  TERA_SHARED(float, dPt_all, kFlashTcWarps * kFlashTcRows * kQ);
  TERA_SHARED(uint16_t, Pt_all, kFlashTcWarps * kFlashTcRows * kQ);
  TERA_SHARED(uint16_t, dSt_all, kFlashTcWarps * kFlashTcRows * kQ);
  TERA_SHARED(float, dK_all, kFlashTcWarps * kFlashTcRows * kFlashTcMaxHead);
  TERA_SHARED(float, dV_all, kFlashTcWarps * kFlashTcRows * kFlashTcMaxHead);
  TERA_SHARED(uint16_t, Qs, kQ * kFlashTcMaxHead);  // the queries' tile
  TERA_SHARED(uint16_t, dY, kQ * kFlashTcMaxHead);  // their output gradients, in bf16
  const int64_t sb = static_cast<int64_t>(block_x()) * kFlashTcBlockRows, bg = block_y();
  const int64_t s0 = sb + static_cast<int64_t>(warp_id()) * kFlashTcRows;
  const int64_t b = bg / a.KV, g = bg % a.KV, W = a.width(), C = a.H * a.hs, hs = a.hs;
  const bool active = s0 < a.T;
  const int w = warp_id();
  float* St = St_all + w * kFlashTcRows * kQ;
  float* dPt = dPt_all + w * kFlashTcRows * kQ;
  uint16_t* Pt = Pt_all + w * kFlashTcRows * kQ;
  uint16_t* dSt = dSt_all + w * kFlashTcRows * kQ;
  float* dK = dK_all + w * kFlashTcRows * kFlashTcMaxHead;
  float* dV = dV_all + w * kFlashTcRows * kFlashTcMaxHead;
  const uint16_t* base = qkv + b * a.T * W;
  for (int64_t e = lane_id(); e < kFlashTcRows * hs; e += warp_size()) {
    dK[e] = 0.0f;
    dV[e] = 0.0f;
  }
  for (int64_t h = g * a.group(); h < (g + 1) * a.group(); ++h) {
    for (int64_t t0 = sb; t0 < a.T; t0 += kQ) {
      // Queries t0 .. t0 + 15; the warp's keys s0 + r see those with t >= s0.
      block_sync();  // the previous step's tiles are no longer read
      stage_rows(Qs, base + t0 * W + a.q(h), W, kQ, hs);
      stage_rows(dY, dout + (b * a.T + t0) * C + h * hs, C, kQ, hs);
      block_sync();
      if (!active || t0 < s0) continue;
      tile_products_bt(St, kQ, base + s0 * W + a.k(g), W, Qs, hs, 1, hs);
      tile_products_bt(dPt, kQ, base + s0 * W + a.v(g), W, dY, hs, 1, hs);
      for (int64_t e = lane_id(); e < kFlashTcRows * kQ; e += warp_size()) {
        const int64_t r = e / kQ, j = e % kQ, s = s0 + r, t = t0 + j;
        const int64_t row = (b * a.H + h) * a.T + t;
        const float p = t >= s ? expf(St[e] * scale - lse[row]) : 0.0f;
        Pt[e] = float_to_bf16(p);
        dSt[e] = float_to_bf16(p * (dPt[e] - D[row]) * scale);
      }
      tile_accumulate(dV, Pt, kQ, dY, hs, 1, hs);
      tile_accumulate(dK, dSt, kQ, Qs, hs, 1, hs);
    }
  }
  if (!active) return;
  for (int64_t e = lane_id(); e < kFlashTcRows * hs; e += warp_size()) {
    const int64_t s = s0 + e / hs, i = e % hs;
    dqkv[(b * a.T + s) * W + a.k(g) + i] = dK[e];
    dqkv[(b * a.T + s) * W + a.v(g) + i] = dV[e];
  }
}

TERA_GPU_END
