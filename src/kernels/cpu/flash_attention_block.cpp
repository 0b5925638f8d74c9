// Flash attention of local queries against one K/V block (ops.h
// FlashAttentionBlock*Fn): the building block of ring attention. Query t
// sees key s iff pos_k[s] <= pos_q[t], whatever the order of the positions.
// Two forms: a scalar template (one query row at a time, a dot product per
// key; double: the reference of the conformance test; float: timed against
// the tiled form by attention_bench --block), and the CPU backend's fp32
// kernels in tiles of 64 queries x 64 keys on the tile steps of
// flash_attention.cpp (flash_tiles.h).
//
// forward: the online softmax of flash attention started from the row's
// (out, lse) when accumulating: lse is the running max with a running sum
// of 1 and out the accumulator (out = acc / l and lse = m + log l of the
// keys seen so far), so the keys of this block continue the same softmax
// and the merge by log-sum-exp is its last step. A row at lse = -inf starts
// from nothing (m = -inf, l = 0, acc = 0; out is written only if it sees a
// key, and zeroed if it sees none and accumulate is off); a key tile the
// row sees none of leaves it as it was, so no exp(-inf - -inf) arises.
// backward, one task per (b, key/value group g), so every gradient row is
// added to by one thread in a fixed order (deterministic, no atomics):
//   P = exp(scale q.k - lse)   dS = P (dout.v - D) scale,  D = dout . out
//   dq += dS k,   dk += dS q,   dv += P dout
// with lse and out the final ones over every block.
// The tiled forms classify each (query tile, key tile) pair by the range
// of positions on either side: none seen (max pos_q < min pos_k) is
// skipped, all seen (min pos_q >= max pos_k) runs without a mask, and only
// the rest compares positions key by key. Under the load-balanced split of
// ring attention nearly every pair is one of the first two.
#include <algorithm>
#include <cmath>
#include <vector>

#include "kernels/cpu/attention_heads.h"
#include "kernels/cpu/cpu_ops.h"
#include "kernels/cpu/flash_rows.h"
#include "kernels/cpu/flash_tiles.h"
#include "kernels/cpu/vec_math.h"

namespace tera::cpu {

namespace {

constexpr int64_t kBlockKeys = 64;  // keys per online-softmax step


// The K/V block's layout: per token KV key heads, then KV value heads.
struct KvBlock {
  int64_t KV, hs;
  int64_t width() const { return 2 * KV * hs; }
  int64_t k(int64_t g) const { return g * hs; }
  int64_t v(int64_t g) const { return (KV + g) * hs; }
};

// One query row: y[hs] (the row of out) and *lse continue the softmax over
// the keys of the block (K, V: the block's first row at the row's head).
template <typename T>
void block_row_forward(T* y, T* lse, const T* q, const T* K, const T* V, int64_t ldk, const int32_t* pos_k,
                       int32_t pos, int64_t Tk, int64_t hs, T scale, bool accumulate, T* S) {
  T m = -INFINITY, l = 0;
  if (accumulate && *lse != -INFINITY) {
    m = *lse;
    l = 1;
  }
  for (int64_t s0 = 0; s0 < Tk; s0 += kBlockKeys) {
    const int64_t n = std::min(kBlockKeys, Tk - s0);
    T mx = -INFINITY;
    for (int64_t j = 0; j < n; ++j) {
      S[j] = pos_k[s0 + j] <= pos ? dot(q, K + (s0 + j) * ldk, hs) * scale : T(-INFINITY);
      mx = std::max(mx, S[j]);
    }
    if (mx == -INFINITY) continue;  // no key of this tile is seen
    mx = std::max(mx, m);
    const T corr = m == -INFINITY ? T(0) : exp_v<T>(m - mx);
    if (m == -INFINITY) {
      std::fill(y, y + hs, T(0));  // the first key the row sees: y held nothing of its own
    } else {
#pragma omp simd
      for (int64_t i = 0; i < hs; ++i) y[i] *= corr;
    }
    T sum = 0;
    for (int64_t j = 0; j < n; ++j) {
      if (S[j] == -INFINITY) continue;
      const T p = exp_v<T>(S[j] - mx);
      const T* v = V + (s0 + j) * ldk;
#pragma omp simd
      for (int64_t i = 0; i < hs; ++i) y[i] += p * v[i];
      sum += p;
    }
    l = l * corr + sum;
    m = mx;
  }
  if (l == 0) {  // no key seen, in this block or before: out = 0 of its own, or as it was
    if (!accumulate) std::fill(y, y + hs, T(0));
    *lse = -INFINITY;
    return;
  }
  const T inv = T(1) / l;
#pragma omp simd
  for (int64_t i = 0; i < hs; ++i) y[i] *= inv;
  *lse = m + std::log(l);
}

}  // namespace

template <typename T>
void flash_attention_block_forward(T* out, T* lse, const T* qkv, const T* kv, const int32_t* pos_q,
                                   const int32_t* pos_k, int64_t B, int64_t Tq, int64_t Tk, int64_t H, int64_t KV,
                                   int64_t hs, bool accumulate) {
  const AttentionHeads hd{H, KV, hs};
  const KvBlock kb{KV, hs};
  const int64_t W = hd.width(), Wk = kb.width(), C = H * hs;
  const T scale = attention_scale<T>(hs);
#pragma omp parallel
  {
    std::vector<T> S(static_cast<size_t>(kBlockKeys));
#pragma omp for collapse(3) schedule(static)
    for (int64_t b = 0; b < B; ++b) {
      for (int64_t h = 0; h < H; ++h) {
        for (int64_t t = 0; t < Tq; ++t) {
          const int64_t g = h / hd.group();
          const T* kbase = kv + b * Tk * Wk;
          block_row_forward(out + (b * Tq + t) * C + h * hs, lse + (b * H + h) * Tq + t,
                            qkv + (b * Tq + t) * W + hd.q(h), kbase + kb.k(g), kbase + kb.v(g), Wk, pos_k, pos_q[t],
                            Tk, hs, scale, accumulate, S.data());
        }
      }
    }
  }
}

template <typename T>
void flash_attention_block_backward(T* dqkv, T* dkv, const T* dout, const T* qkv, const T* kv, const T* out,
                                    const T* lse, const int32_t* pos_q, const int32_t* pos_k, int64_t B, int64_t Tq,
                                    int64_t Tk, int64_t H, int64_t KV, int64_t hs) {
  const AttentionHeads hd{H, KV, hs};
  const KvBlock kb{KV, hs};
  const int64_t W = hd.width(), Wk = kb.width(), C = H * hs;
  const T scale = attention_scale<T>(hs);
#pragma omp parallel for collapse(2) schedule(static)
  for (int64_t b = 0; b < B; ++b) {
    for (int64_t g = 0; g < KV; ++g) {
      const T* kbase = kv + b * Tk * Wk;
      T* dkbase = dkv + b * Tk * Wk;
      for (int64_t h = g * hd.group(); h < (g + 1) * hd.group(); ++h) {
        for (int64_t t = 0; t < Tq; ++t) {
          const T l = lse[(b * H + h) * Tq + t];
          if (l == -INFINITY) continue;  // a row that sees no key at all has no gradient
          const T* q = qkv + (b * Tq + t) * W + hd.q(h);
          const T* dy = dout + (b * Tq + t) * C + h * hs;
          const T D = dot(dy, out + (b * Tq + t) * C + h * hs, hs);
          T* dq = dqkv + (b * Tq + t) * W + hd.q(h);
          for (int64_t s = 0; s < Tk; ++s) {
            if (pos_k[s] > pos_q[t]) continue;
            flash_pair_backward(dq, dkbase + s * Wk + kb.k(g), dkbase + s * Wk + kb.v(g), q, kbase + s * Wk + kb.k(g),
                                kbase + s * Wk + kb.v(g), dy, D, l, scale, hs);
          }
        }
      }
    }
  }
}

namespace {

constexpr int64_t kTile = kFlashTile;

// The positions a tile of up to kTile consecutive tokens spans.
struct PosRange {
  int32_t lo, hi;
};
std::vector<PosRange> tile_ranges(const int32_t* pos, int64_t n) {
  std::vector<PosRange> r;
  for (int64_t t0 = 0; t0 < n; t0 += kTile) {
    const auto [lo, hi] = std::minmax_element(pos + t0, pos + std::min(n, t0 + kTile));
    r.push_back({*lo, *hi});
  }
  return r;
}

enum class Sight { none, all, some };

// A call's shapes and its tiles: the query tiles' and key tiles' position
// ranges, and what the queries of a tile see of a key tile.
struct BlockTiles {
  BlockTiles(const int32_t* pos_q, const int32_t* pos_k, int64_t Tq, int64_t Tk, int64_t H, int64_t KV, int64_t hs)
      : hd{H, KV, hs}, kb{KV, hs}, qr(tile_ranges(pos_q, Tq)), kr(tile_ranges(pos_k, Tk)) {}
  AttentionHeads hd;
  KvBlock kb;
  std::vector<PosRange> qr, kr;
  int64_t qtiles() const { return static_cast<int64_t>(qr.size()); }
  int64_t ktiles() const { return static_cast<int64_t>(kr.size()); }
  Sight sight(int64_t qt, int64_t kt) const {
    const PosRange q = qr[qt], k = kr[kt];
    return q.hi < k.lo ? Sight::none : q.lo >= k.hi ? Sight::all : Sight::some;
  }
};

}  // namespace

void flash_attention_block_forward_f32(float* out, float* lse, const float* qkv, const float* kv, const int32_t* pos_q,
                                       const int32_t* pos_k, int64_t B, int64_t Tq, int64_t Tk, int64_t H, int64_t KV,
                                       int64_t hs, bool accumulate) {
  const BlockTiles bt(pos_q, pos_k, Tq, Tk, H, KV, hs);
  const AttentionHeads& hd = bt.hd;
  const KvBlock& kb = bt.kb;
  const int64_t W = hd.width(), Wk = kb.width(), C = H * hs;
  const float scale = attention_scale<float>(hs);
  for_each_query_tile(B, H, bt.qtiles(), hs, [&](FlashTileScratch& sc, int64_t b, int64_t h, int64_t qt) {
    float *acc = sc.acc.data(), *m = sc.m.data(), *l = sc.l.data();
    const int64_t g = h / hd.group(), t0 = qt * kTile, M = std::min(kTile, Tq - t0);
    float* Y = out + (b * Tq + t0) * C + h * hs;  // [M, hs], ld C
    float* L = lse + (b * H + h) * Tq + t0;       // [M]
    for (int64_t r = 0; r < M; ++r) {
      const bool start = accumulate && L[r] != -INFINITY;  // continue the row's softmax
      m[r] = start ? L[r] : -INFINITY;
      l[r] = start ? 1.0f : 0.0f;
      if (start) {
        std::copy(Y + r * C, Y + r * C + hs, acc + r * hs);
      } else {
        std::fill(acc + r * hs, acc + (r + 1) * hs, 0.0f);
      }
    }
    const float* Q = qkv + (b * Tq + t0) * W + hd.q(h);
    for (int64_t kt = 0; kt < bt.ktiles(); ++kt) {
      const Sight v = bt.sight(qt, kt);
      if (v == Sight::none) continue;
      const int64_t s0 = kt * kTile, N = std::min(kTile, Tk - s0);
      const float* kbase = kv + (b * Tk + s0) * Wk;
      if (v == Sight::all) {
        flash_forward_tile(sc, Q, W, kbase + kb.k(g), kbase + kb.v(g), Wk, M, N, hs, [&](int64_t r, float* row) {
          return online_softmax_row(row, N, N, scale, m[r], l[r]);
        });
      } else {
        flash_forward_tile(sc, Q, W, kbase + kb.k(g), kbase + kb.v(g), Wk, M, N, hs, [&](int64_t r, float* row) {
          return online_softmax_row_masked(row, pos_k + s0, pos_q[t0 + r], N, scale, m[r], l[r]);
        });
      }
    }
    for (int64_t r = 0; r < M; ++r) {
      if (l[r] == 0) {  // no key seen, in this block or before: out = 0 of its own, or as it was
        if (!accumulate) std::fill(Y + r * C, Y + r * C + hs, 0.0f);
        L[r] = -INFINITY;
      } else {
        finish_row(Y + r * C, acc + r * hs, hs, m[r], l[r], &L[r]);
      }
    }
  });
}

void flash_attention_block_backward_f32(float* dqkv, float* dkv, const float* dout, const float* qkv, const float* kv,
                                        const float* out, const float* lse, const int32_t* pos_q, const int32_t* pos_k,
                                        int64_t B, int64_t Tq, int64_t Tk, int64_t H, int64_t KV, int64_t hs) {
  const BlockTiles bt(pos_q, pos_k, Tq, Tk, H, KV, hs);
  const AttentionHeads& hd = bt.hd;
  const KvBlock& kb = bt.kb;
  const int64_t W = hd.width(), Wk = kb.width(), C = H * hs;
  const float scale = attention_scale<float>(hs);
  for_each_kv_group(B, KV, Tq, hs, [&](FlashTileScratch& sc, float* D, int64_t b, int64_t g) {
    for (int64_t h = g * hd.group(); h < (g + 1) * hd.group(); ++h) {
      const float* ls = lse + (b * H + h) * Tq;
      output_grad_dots(D, dout + b * Tq * C + h * hs, out + b * Tq * C + h * hs, C, Tq, hs);
      for (int64_t kt = 0; kt < bt.ktiles(); ++kt) {
        const int64_t s0 = kt * kTile, N = std::min(kTile, Tk - s0);
        const float* kbase = kv + (b * Tk + s0) * Wk;
        float* dkbase = dkv + (b * Tk + s0) * Wk;
        bool transposed = false;
        for (int64_t qt = 0; qt < bt.qtiles(); ++qt) {
          const Sight v = bt.sight(qt, kt);
          if (v == Sight::none) continue;
          if (!transposed) {
            transpose_tile(sc.Kt.data(), kbase + kb.k(g), Wk, N, hs);
            transpose_tile(sc.Vt.data(), kbase + kb.v(g), Wk, N, hs);
            transposed = true;
          }
          const int64_t t0 = qt * kTile, M = std::min(kTile, Tq - t0);
          // A row at lse = -inf sees no key at all and has no gradient.
          auto grads_row = [&](int64_t r, float* s, float* dp) {
            const float lr = ls[t0 + r];
            if (lr == -INFINITY) {
              std::fill(s, s + N, 0.0f);
              std::fill(dp, dp + N, 0.0f);
            } else if (v == Sight::all) {
              probs_and_score_grads_row(s, dp, N, N, scale, lr, D[t0 + r]);
            } else {
              probs_and_score_grads_row_masked(s, dp, pos_k + s0, pos_q[t0 + r], N, scale, lr, D[t0 + r]);
            }
          };
          flash_backward_tile(sc, dqkv + (b * Tq + t0) * W + hd.q(h), W, dkbase + kb.k(g), dkbase + kb.v(g), Wk,
                              qkv + (b * Tq + t0) * W + hd.q(h), W, dout + (b * Tq + t0) * C + h * hs, C,
                              kbase + kb.k(g), Wk, M, N, hs, grads_row);
        }
      }
    }
  });
}

template void flash_attention_block_forward<float>(float*, float*, const float*, const float*, const int32_t*,
                                                   const int32_t*, int64_t, int64_t, int64_t, int64_t, int64_t,
                                                   int64_t, bool);
template void flash_attention_block_forward<double>(double*, double*, const double*, const double*, const int32_t*,
                                                    const int32_t*, int64_t, int64_t, int64_t, int64_t, int64_t,
                                                    int64_t, bool);
template void flash_attention_block_backward<float>(float*, float*, const float*, const float*, const float*,
                                                    const float*, const float*, const int32_t*, const int32_t*,
                                                    int64_t, int64_t, int64_t, int64_t, int64_t, int64_t);
template void flash_attention_block_backward<double>(double*, double*, const double*, const double*, const double*,
                                                     const double*, const double*, const int32_t*, const int32_t*,
                                                     int64_t, int64_t, int64_t, int64_t, int64_t, int64_t);

}  // namespace tera::cpu
