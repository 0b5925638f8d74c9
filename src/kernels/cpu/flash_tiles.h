// One tile step of the CPU fp32 flash attention, shared by the full-sequence
// kernels (flash_attention.cpp) and ring attention's block kernels
// (flash_attention_block.cpp): M <= 64 query rows against N <= 64 keys, the
// products on tile_mac_f32. Which keys a row counts (the causal diagonal, or
// arbitrary positions) is the caller's row function; the step only runs it.
#pragma once

#include <algorithm>
#include <cstdint>
#include <vector>

#include "kernels/cpu/flash_rows.h"
#include "kernels/cpu/tile_mac.h"

namespace tera::cpu {

// One thread's tile buffers (kT = kFlashTile).
struct FlashTileScratch {
  static constexpr int64_t kT = kFlashTile;
  explicit FlashTileScratch(int64_t hs)
      : S(kT * kT), dP(kT * kT), PT(kT * kT), dST(kT * kT), Kt(kT * hs), Vt(kT * hs), acc(kT * hs), m(kT), l(kT) {}
  std::vector<float> S, dP, PT, dST;  // [kT, kT]: scores / P, dP / dS, and the transposes of P and dS
  std::vector<float> Kt, Vt;          // [hs, kT]: the key tile's K and V transposed
  std::vector<float> acc;             // [kT, hs]: the forward's P V accumulator
  std::vector<float> m, l;            // [kT]: the forward's running max and sum per row
};

// dst[i, n] = src[n * ld + i] for n < N, i < hs: a tile's rows [N, hs] into
// columns of dst[hs, kFlashTile], the B operand of Q K^T.
inline void transpose_tile(float* dst, const float* src, int64_t ld, int64_t N, int64_t hs) {
  for (int64_t n = 0; n < N; ++n) {
    for (int64_t i = 0; i < hs; ++i) dst[i * kFlashTile + n] = src[n * ld + i];
  }
}

// D_t = dy_t . y_t for T rows (dy, y: leading dimension ld): the backward's
// rowsum(P * dP), from the output.
inline void output_grad_dots(float* D, const float* dy, const float* y, int64_t ld, int64_t T_, int64_t hs) {
  for (int64_t t = 0; t < T_; ++t) {
    const float *a = dy + t * ld, *b = y + t * ld;
    float d = 0;
#pragma omp simd reduction(+ : d)
    for (int64_t i = 0; i < hs; ++i) d += a[i] * b[i];
    D[t] = d;
  }
}

// The forward's tasks, one per (b, h, query tile), the last query tiles
// (the longest under a causal mask) first, on OpenMP threads with a scratch
// each: task(sc, b, h, qt).
template <typename Task>
inline void for_each_query_tile(int64_t B, int64_t H, int64_t tiles, int64_t hs, Task task) {
#pragma omp parallel
  {
    FlashTileScratch sc(hs);
#pragma omp for collapse(3) schedule(dynamic)
    for (int64_t b = 0; b < B; ++b) {
      for (int64_t h = 0; h < H; ++h) {
        for (int64_t qt = tiles - 1; qt >= 0; --qt) task(sc, b, h, qt);
      }
    }
  }
}

// The backward's tasks, one per (b, key/value group g), so that each
// gradient row is added to by one thread in a fixed order (deterministic, no
// atomics): task(sc, D, b, g), D a scratch of T floats.
template <typename Task>
inline void for_each_kv_group(int64_t B, int64_t KV, int64_t T_, int64_t hs, Task task) {
#pragma omp parallel
  {
    FlashTileScratch sc(hs);
    std::vector<float> D(static_cast<size_t>(T_));  // [T]
#pragma omp for collapse(2) schedule(dynamic)
    for (int64_t b = 0; b < B; ++b) {
      for (int64_t g = 0; g < KV; ++g) task(sc, D.data(), b, g);
    }
  }
}

// The forward over one key tile: S = Q K^T; softmax_row(r, S row r) makes
// row r's probabilities, updates sc.m[r], sc.l[r] and returns the factor
// that rescales its accumulator; then sc.acc += P V.
// Q[M, hs] (ldq), K, V [N, hs] (ldk).
template <typename SoftmaxRow>
inline void flash_forward_tile(FlashTileScratch& sc, const float* Q, int64_t ldq, const float* K, const float* V,
                               int64_t ldk, int64_t M, int64_t N, int64_t hs, SoftmaxRow softmax_row) {
  constexpr int64_t kT = kFlashTile;
  float *S = sc.S.data(), *acc = sc.acc.data();
  std::fill(S, S + M * kT, 0.0f);
  transpose_tile(sc.Kt.data(), K, ldk, N, hs);
  tile_mac_f32(S, kT, Q, ldq, sc.Kt.data(), kT, M, N, hs);
  for (int64_t r = 0; r < M; ++r) {
    const float corr = softmax_row(r, S + r * kT);
    float* a = acc + r * hs;
#pragma omp simd
    for (int64_t i = 0; i < hs; ++i) a[i] *= corr;
  }
  tile_mac_f32(acc, hs, S, kT, V, ldk, M, hs, N);
}

// The backward of one (query tile, key tile) pair, sc.Kt and sc.Vt holding
// the key tile's K and V transposed (transpose_tile): S = Q K^T, dP = dY
// V^T; grads_row(r, S row, dP row) turns row r into P and dS; then
//   dV += P^T dY,   dK += dS^T Q,   dQ += dS K.
// Q[M, hs] (ldq), dY[M, hs] (ldy), dQ (lddq); K[N, hs] (ldk); dK, dV (lddk).
template <typename GradsRow>
inline void flash_backward_tile(FlashTileScratch& sc, float* dQ, int64_t lddq, float* dK, float* dV, int64_t lddk,
                                const float* Q, int64_t ldq, const float* dY, int64_t ldy, const float* K, int64_t ldk,
                                int64_t M, int64_t N, int64_t hs, GradsRow grads_row) {
  constexpr int64_t kT = kFlashTile;
  float *S = sc.S.data(), *dP = sc.dP.data(), *PT = sc.PT.data(), *dST = sc.dST.data();
  std::fill(S, S + M * kT, 0.0f);
  std::fill(dP, dP + M * kT, 0.0f);
  tile_mac_f32(S, kT, Q, ldq, sc.Kt.data(), kT, M, N, hs);
  tile_mac_f32(dP, kT, dY, ldy, sc.Vt.data(), kT, M, N, hs);
  // P and dS in place of S and dP, and their transposes for dV and dK.
  for (int64_t r = 0; r < M; ++r) {
    float *srow = S + r * kT, *dprow = dP + r * kT;
    grads_row(r, srow, dprow);
    for (int64_t n = 0; n < N; ++n) {
      PT[n * kT + r] = srow[n];
      dST[n * kT + r] = dprow[n];
    }
  }
  tile_mac_f32(dV, lddk, PT, kT, dY, ldy, N, hs, M);
  tile_mac_f32(dK, lddk, dST, kT, Q, ldq, N, hs, M);
  tile_mac_f32(dQ, lddq, dP, kT, K, ldk, M, hs, N);
}

}  // namespace tera::cpu
