// The per-row fp32 arithmetic of the CPU flash attention tiles, shared by
// the fp32 and the bf16 kernels (flash_attention.cpp,
// flash_attention_bf16.cpp) and ring attention's blocks
// (flash_attention_block.cpp): the online softmax of one row of a score
// tile in the forward, and the recomputed probabilities and score gradients
// of one row in the backward. A row holds N keys of a tile, of which the
// first `valid` are causal (s <= t), or, in the _masked forms, those whose
// position is at most the row's; the rest become exact zeros.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>

#include "kernels/cpu/vec_math.h"

namespace tera::cpu {

constexpr int64_t kFlashTile = 64;  // query rows and keys per tile

// row[0, valid): raw scores q.k; becomes exp(scale q.k - m_new), and
// row[valid, N) zero; the running max m and sum l of the row are updated.
// Returns exp(m_old - m_new), by which the row's accumulator is rescaled.
inline float online_softmax_row(float* row, int64_t valid, int64_t N, float scale, float& m, float& l) {
  float mx = m;
#pragma omp simd reduction(max : mx)
  for (int64_t n = 0; n < valid; ++n) mx = std::max(mx, row[n] * scale);
  const float corr = exp_v<float>(m - mx);
  float sum = 0;
#pragma omp simd reduction(+ : sum)
  for (int64_t n = 0; n < valid; ++n) {
    row[n] = exp_v<float>(row[n] * scale - mx);
    sum += row[n];
  }
  for (int64_t n = valid; n < N; ++n) row[n] = 0;
  l = l * corr + sum;
  m = mx;
  return corr;
}

// The same for keys at arbitrary positions (ring attention's blocks): key n
// counts iff pos_k[n] <= pos; the others become exact zeros. A row that sees
// no key of the tile is left at zero with m, l unchanged and returns 1 (no
// exp(-inf - -inf), and the accumulator kept bit for bit).
inline float online_softmax_row_masked(float* row, const int32_t* pos_k, int32_t pos, int64_t N, float scale, float& m,
                                       float& l) {
  float mx = -INFINITY;
#pragma omp simd reduction(max : mx)
  for (int64_t n = 0; n < N; ++n) mx = std::max(mx, pos_k[n] <= pos ? row[n] * scale : -INFINITY);
  if (mx == -INFINITY) {
    std::fill(row, row + N, 0.0f);
    return 1.0f;
  }
  mx = std::max(mx, m);
  const float corr = exp_v<float>(m - mx);
  float sum = 0;
#pragma omp simd reduction(+ : sum)
  for (int64_t n = 0; n < N; ++n) {
    const float p = exp_v<float>(row[n] * scale - mx);
    row[n] = pos_k[n] <= pos ? p : 0.0f;
    sum += row[n];
  }
  l = l * corr + sum;
  m = mx;
  return corr;
}

// The same for a transposed score tile st[N, M] (row n: key n of the tile,
// column q: query q), the form whose reductions run down the columns in
// vector lanes: key n is causal for query q iff n <= q + diag (diag = t0 -
// s0, the queries' first row minus the keys'; every query has key 0).
// st becomes P^T, zero where not causal; m, l: the M queries' running max
// and sum; corr[q] = exp(m_old - m_new); mx, sum: scratch of M floats.
// Full: M == kFlashTile and every key causal for every query (a tile below
// the diagonal, the common case): loops of a fixed length, which the
// compiler unrolls into whole vectors.
template <bool Full>
inline void online_softmax_columns_impl(float* st, int64_t ld, int64_t N, int64_t M_, int64_t diag, float scale,
                                        float* m, float* l, float* corr, float* mx, float* sum) {
  const int64_t M = Full ? kFlashTile : M_;
  auto first = [&](int64_t n) { return Full ? int64_t{0} : std::clamp<int64_t>(n - diag, 0, M); };
  for (int64_t q = 0; q < M; ++q) {
    mx[q] = m[q];
    sum[q] = 0;
  }
  for (int64_t n = 0; n < N; ++n) {
    const float* row = st + n * ld;
#pragma omp simd
    for (int64_t q = first(n); q < M; ++q) {
      const float v = row[q] * scale;
      mx[q] = v > mx[q] ? v : mx[q];
    }
  }
  for (int64_t n = 0; n < N; ++n) {
    float* row = st + n * ld;
    const int64_t from = first(n);
    for (int64_t q = 0; q < from; ++q) row[q] = 0;
#pragma omp simd
    for (int64_t q = from; q < M; ++q) {
      const float p = exp_v<float>(row[q] * scale - mx[q]);
      row[q] = p;
      sum[q] += p;
    }
  }
#pragma omp simd
  for (int64_t q = 0; q < M; ++q) {
    corr[q] = exp_v<float>(m[q] - mx[q]);
    l[q] = l[q] * corr[q] + sum[q];
    m[q] = mx[q];
  }
}

inline void online_softmax_columns(float* st, int64_t ld, int64_t N, int64_t M, int64_t diag, float scale, float* m,
                                   float* l, float* corr, float* mx, float* sum) {
  if (M == kFlashTile && diag >= N - 1) {
    online_softmax_columns_impl<true>(st, ld, N, M, diag, scale, m, l, corr, mx, sum);
  } else {
    online_softmax_columns_impl<false>(st, ld, N, M, diag, scale, m, l, corr, mx, sum);
  }
}

// The end of a query row in the forward: y = a / l (the accumulated P V
// over the row's softmax sum), and the row's log-sum-exp m + log l, which
// the backward recomputes P from.
inline void finish_row(float* y, const float* a, int64_t hs, float m, float l, float* lse) {
  const float inv = 1.0f / l;
#pragma omp simd
  for (int64_t i = 0; i < hs; ++i) y[i] = a[i] * inv;
  *lse = m + std::log(l);
}

// s[0, valid): raw scores q.k, dp[0, valid): dy.v; become P = exp(scale q.k
// - lse) and dS = P (dP - D) scale, and both zero on [valid, N).
// (A full row of kFlashTile causal keys takes loops of a fixed length.)
inline void probs_and_score_grads_row(float* s, float* dp, int64_t valid, int64_t N, float scale, float lse, float D) {
  auto run = [&](int64_t count) {
#pragma omp simd
    for (int64_t n = 0; n < count; ++n) {
      const float p = exp_v<float>(s[n] * scale - lse);
      s[n] = p;
      dp[n] = p * (dp[n] - D) * scale;
    }
  };
  if (valid == kFlashTile) {
    run(kFlashTile);
    return;
  }
  run(valid);
  for (int64_t n = valid; n < N; ++n) s[n] = dp[n] = 0;
}

// The same for keys at arbitrary positions: key n counts iff pos_k[n] <=
// pos; the others become exact zeros.
inline void probs_and_score_grads_row_masked(float* s, float* dp, const int32_t* pos_k, int32_t pos, int64_t N,
                                             float scale, float lse, float D) {
#pragma omp simd
  for (int64_t n = 0; n < N; ++n) {
    const float p = pos_k[n] <= pos ? exp_v<float>(s[n] * scale - lse) : 0.0f;
    s[n] = p;
    dp[n] = p * (dp[n] - D) * scale;
  }
}

}  // namespace tera::cpu
