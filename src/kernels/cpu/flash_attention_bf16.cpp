// The CPU backend's bf16 flash attention (ops.h FlashAttention*Bf16Fn,
// train.precision = "bf16"): the tiles of 64 queries x 64 keys of the fp32
// kernels (flash_attention.cpp), with every product on tile_mac_bf16 (AMX
// tiles, AVX512-BF16 dot products or widened fp32: tile_mac.h) over bf16
// operands (q, k, v as kept; dy, P and dS rounded as they are packed),
// accumulating in fp32; the online softmax, lse, D and every sum stay fp32
// (flash_rows.h).
//
// The operands are packed (tile_pack.h) so that the repeated work per pair
// of tiles is no more than rounding P and dS: whatever depends on one side
// only is packed once per task. Contractions are padded with zeros to
// multiples of 32 (whole AMX tiles), and every tile operand row starts at a
// 64-byte boundary (64-byte aligned scratch; leading dimensions of 32 bf16,
// 16 pairs or 16 floats). Shapes: hsP = hs rounded up to 32, hsC to 16; a
// tile of M queries (N keys) contracts over MP (NP) = M (N) rounded up to
// 32; a B operand of M (N) columns has ld ldM (ldN) = M (N) rounded up to 16.
//
// forward, one task per (b, h, chunk of query tiles) (query tiles qt = c,
// c + chunks, ...; one chunk a head unless there are too few heads to busy
// the threads), transposed so that the softmax reduces down columns in
// vector lanes:
//   per task, key tiles j the chunk reads: Ka[j] = k [N, hsP], Vt[j] = v^T [hs, kTile]
//   per query tile: Qb = q^T as B pairs [hsP/2][ldM]; per key tile j <= qt:
//     S^T[N,M] = Ka[j] Qb;  online softmax down the columns (m, l per query);
//     acc^T[hs,M] = corr acc^T + Vt[j] Pb   (Pb: P^T as B pairs over keys [NP/2][ldM])
//   y = (acc^T)^T / l,  lse = m + log l
// backward, one task per (b, group g), so each gradient row is written by
// one thread in a fixed order (deterministic, no atomics; no zeroing pass:
// the first write of each row overwrites); per head h of the group:
//   per query tile, once: D = rowsum(dy y); Qa, dYa [kTile, hsP]; Qt, dYt = q^T,
//     dy^T [hs, Tp] (tile i at column i kTile)
//   per key tile j: Kt, Vt = k^T, v^T as B pairs [hsP/2][ldN]; Kn = k as B pairs [NP/2][hsC];
//     per query tile i >= j:
//       S = Qa Kt;  dP = dYa Vt;  P = exp(scale S - lse), dS = P (dP - D) scale;
//       dQ[M,hs] (+)= dS Kn   (into the head's dQ [Tp, hsC], copied out at its end)
//     per group of kGroup query tiles (consecutive columns of Qt, dYt; P, dS stacked as B pairs):
//       dV^T[hs,N] (+)= dYt P;  dK^T (+)= Qt dS
//     dV, dK (+)= the transposes (the group's first head writes, the others add)
#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include <omp.h>

#include "core/check.h"

#include "kernels/cpu/attention_heads.h"
#include "kernels/cpu/cpu_ops.h"
#include "kernels/cpu/flash_rows.h"
#include "kernels/cpu/tile_mac.h"
#include "kernels/cpu/tile_pack.h"

namespace tera::cpu {

namespace {

constexpr int64_t kTile = kFlashTile;
constexpr int64_t kPad = 32;  // contraction lengths are padded to this (two bf16 tiles of AMX)
// Query tiles whose dK^T and dV^T products run as one (a contraction of
// kGroup kTile queries: C loaded and stored once per group, not per tile).
constexpr int64_t kGroup = 4;

int64_t round_up(int64_t n, int64_t to) { return (n + to - 1) / to * to; }

// Chunks of query tiles per (b, h) in the forward: enough tasks for about
// four per thread, never more than the tiles.
int64_t forward_chunks(int64_t heads_total, int64_t tiles) {
  const int64_t want = 4 * static_cast<int64_t>(omp_get_max_threads());
  return std::clamp<int64_t>((want + heads_total - 1) / heads_total, 1, tiles);
}

// A thread's scratch: 64-byte aligned buffers, uninitialised (every element
// a product reads is packed first).
class Scratch {
 public:
  template <typename T>
  T* take(int64_t count) {
    const size_t bytes = (static_cast<size_t>(count) * sizeof(T) + 63) / 64 * 64;
    blocks_.emplace_back(static_cast<unsigned char*>(std::aligned_alloc(64, bytes)));
    TERA_ASSERT(blocks_.back() != nullptr, "flash attention: out of memory for " + std::to_string(bytes) + " bytes of tiles");
    return reinterpret_cast<T*>(blocks_.back().get());
  }

 private:
  struct Free {
    void operator()(unsigned char* p) const { std::free(p); }
  };
  std::vector<std::unique_ptr<unsigned char, Free>> blocks_;
};

}  // namespace

void flash_attention_forward_bf16(float* out, float* lse, const uint16_t* qkv, int64_t B, int64_t T_, int64_t H,
                                  int64_t KV, int64_t hs) {
  const AttentionHeads hd{H, KV, hs};
  const int64_t W = hd.width(), C = H * hs, hsP = round_up(hs, kPad);
  const float scale = attention_scale<float>(hs);
  const int64_t tiles = (T_ + kTile - 1) / kTile, chunks = forward_chunks(B * H, tiles);
  const int64_t ka_size = kTile * hsP, vt_size = hs * kTile;  // bf16 values per packed key tile
#pragma omp parallel
  {
    Scratch sc;
    // Per key tile: Ka [kTile, hsP], Vt [hs, kTile]; per query tile Qb [hsP/2][kTile] pairs; Pb
    // [kTile/2][kTile] pairs; and the scratch of the transposing pack.
    uint16_t *Ka = sc.take<uint16_t>(tiles * ka_size), *Vt = sc.take<uint16_t>(tiles * vt_size),
             *Qb = sc.take<uint16_t>(hsP * kTile), *Pb = sc.take<uint16_t>(kTile * kTile),
             *pairs = sc.take<uint16_t>(kTile * hs);
    // S^T [kTile, kTile]; acc^T [hs, kTile] and transposed back [kTile, hs]; per query m, l, corr and scratch.
    float *St = sc.take<float>(kTile * kTile), *accT = sc.take<float>(hs * kTile), *back = sc.take<float>(kTile * hs),
          *m = sc.take<float>(kTile), *l = sc.take<float>(kTile), *corr = sc.take<float>(kTile),
          *mx = sc.take<float>(kTile), *sum = sc.take<float>(kTile);
    const TileMacScope tiles_kept;
#pragma omp for collapse(3) schedule(dynamic)
    for (int64_t b = 0; b < B; ++b) {
      for (int64_t h = 0; h < H; ++h) {
        for (int64_t c = 0; c < chunks; ++c) {
          const int64_t g = h / hd.group(), last = c + (tiles - 1 - c) / chunks * chunks;
          const uint16_t* base = qkv + b * T_ * W;
          for (int64_t j = 0; j <= last; ++j) {  // the key tiles this chunk reads
            const int64_t s0 = j * kTile, N = std::min(kTile, T_ - s0);
            pack_rows(Ka + j * ka_size, hsP, base + s0 * W + hd.k(g), W, N, hs);
            pack_transposed_rows(Vt + j * vt_size, kTile, base + s0 * W + hd.v(g), W, N, hs, kTile, pairs);
          }
          for (int64_t qt = last; qt >= 0; qt -= chunks) {
            const int64_t t0 = qt * kTile, M = std::min(kTile, T_ - t0), ldM = round_up(M, 16);
            pack_transposed_pairs(Qb, ldM, base + t0 * W + hd.q(h), W, M, hs, hsP / 2);
            std::fill(m, m + M, -INFINITY);
            std::fill(l, l + M, 0.0f);
            for (int64_t j = 0; j <= qt; ++j) {
              const int64_t s0 = j * kTile, N = std::min(kTile, T_ - s0), NP = round_up(N, kPad);
              tile_mul_bf16(St, kTile, Ka + j * ka_size, hsP, Qb, ldM, N, M, hsP / 2);  // S^T[N,M] = K Q^T
              online_softmax_columns(St, kTile, N, M, t0 - s0, scale, m, l, corr, mx, sum);
              if (j > 0) {
                for (int64_t i = 0; i < hs; ++i) {
                  float* a = accT + i * kTile;
#pragma omp simd
                  for (int64_t q = 0; q < M; ++q) a[q] *= corr[q];
                }
              }
              pack_row_pairs(Pb, ldM, St, kTile, N, M, NP / 2);
              tile_mac_bf16_form(tile_mac_bf16_selected(), accT, kTile, Vt + j * vt_size, kTile, Pb, ldM, hs, M,
                                 NP / 2, j > 0);  // acc^T[hs,M] (+)= V^T P^T
            }
            transpose32(back, hs, accT, kTile, hs, M);  // back[M, hs]
            for (int64_t r = 0; r < M; ++r) {
              finish_row(out + (b * T_ + t0 + r) * C + h * hs, back + r * hs, hs, m[r], l[r],
                         &lse[(b * H + h) * T_ + t0 + r]);
            }
          }
        }
      }
    }
  }
}

void flash_attention_backward_bf16(float* dqkv, const float* dout, const uint16_t* qkv, const uint16_t* out,
                                   const float* lse, int64_t B, int64_t T_, int64_t H, int64_t KV, int64_t hs) {
  const AttentionHeads hd{H, KV, hs};
  const int64_t W = hd.width(), C = H * hs, hsP = round_up(hs, kPad), hsC = round_up(hs, 16);
  const float scale = attention_scale<float>(hs);
  const int64_t tiles = (T_ + kTile - 1) / kTile, Tp = tiles * kTile;
  const int64_t rows_size = kTile * hsP;  // bf16 values per packed query tile of Qa, dYa
#pragma omp parallel
  {
    Scratch sc;
    // The head's queries: Qa, dYa [kTile, hsP] per query tile; Qt, dYt = q^T, dy^T [hs, Tp] (query tile i
    // at column i kTile, zero-padded to MP); dQ [Tp, hsC] fp32 until the head is done.
    uint16_t *Qa = sc.take<uint16_t>(tiles * rows_size), *dYa = sc.take<uint16_t>(tiles * rows_size),
             *Qt = sc.take<uint16_t>(hs * Tp), *dYt = sc.take<uint16_t>(hs * Tp);
    // Per key tile: Kt, Vt [hsP/2][kTile] pairs; Kn [kTile/2][hsC] pairs. Per group of kGroup query
    // tiles: P and dS as B pairs over the queries, stacked [kGroup kTile/2][kTile]; per pair dSa [kTile,
    // kTile]; and the scratch of the transposing packs.
    uint16_t *Kt = sc.take<uint16_t>(hsP * kTile), *Vt = sc.take<uint16_t>(hsP * kTile),
             *Kn = sc.take<uint16_t>(kTile * hsC), *Pb = sc.take<uint16_t>(kGroup * kTile * kTile),
             *dSb = sc.take<uint16_t>(kGroup * kTile * kTile), *dSa = sc.take<uint16_t>(kTile * kTile),
             *pairs = sc.take<uint16_t>(kTile * hs);
    // S, dP [kTile, kTile]; dK^T, dV^T [hs, kTile] of a key tile and one of them transposed back [kTile, hs].
    float *S = sc.take<float>(kTile * kTile), *dP = sc.take<float>(kTile * kTile), *dKt = sc.take<float>(hs * kTile),
          *dVt = sc.take<float>(hs * kTile), *back = sc.take<float>(kTile * hs), *dQ = sc.take<float>(Tp * hsC),
          *D = sc.take<float>(T_);
    const TileMacScope tiles_kept;
    const TileMacForm form = tile_mac_bf16_selected();
#pragma omp for collapse(2) schedule(dynamic)
    for (int64_t b = 0; b < B; ++b) {
      for (int64_t g = 0; g < KV; ++g) {
        const uint16_t* base = qkv + b * T_ * W;
        float* dbase = dqkv + b * T_ * W;
        for (int64_t h = g * hd.group(); h < (g + 1) * hd.group(); ++h) {
          const bool first_head = h == g * hd.group();  // writes dK, dV; the group's others add
          const float* ls = lse + (b * H + h) * T_;
          const float* dYh = dout + b * T_ * C + h * hs;  // [T, hs] with stride C
          for (int64_t i = 0; i < tiles; ++i) {
            const int64_t t0 = i * kTile, M = std::min(kTile, T_ - t0), MP = round_up(M, kPad);
            for (int64_t t = t0; t < t0 + M; ++t) {  // D_t = dy_t . y_t = rowsum(P * dP), while the rows are at hand
              const float* dy = dYh + t * C;
              const uint16_t* y = out + (b * T_ + t) * C + h * hs;
              float d = 0;
#pragma omp simd reduction(+ : d)
              for (int64_t k = 0; k < hs; ++k) d += dy[k] * from_bf16(y[k]);
              D[t] = d;
            }
            const uint16_t* Q = base + t0 * W + hd.q(h);
            pack_rows(Qa + i * rows_size, hsP, Q, W, M, hs);
            pack_rows(dYa + i * rows_size, hsP, dYh + t0 * C, C, M, hs);
            pack_transposed_rows(Qt + t0, Tp, Q, W, M, hs, MP, pairs);
            pack_transposed_rows(dYt + t0, Tp, dYh + t0 * C, C, M, hs, MP, pairs);
          }
          for (int64_t j = 0; j < tiles; ++j) {
            const int64_t s0 = j * kTile, N = std::min(kTile, T_ - s0), NP = round_up(N, kPad), ldN = round_up(N, 16);
            const uint16_t* K = base + s0 * W + hd.k(g);
            pack_transposed_pairs(Kt, ldN, K, W, N, hs, hsP / 2);                         // S = Q K^T
            pack_transposed_pairs(Vt, ldN, base + s0 * W + hd.v(g), W, N, hs, hsP / 2);  // dP = dY V^T
            pack_row_pairs(Kn, hsC, K, W, N, hs, NP / 2);                                 // dQ = dS K
            for (int64_t i0 = j; i0 < tiles; i0 += kGroup) {
              const int64_t i1 = std::min(i0 + kGroup, tiles);
              int64_t K2 = 0;  // pairs of queries the group stacks
              for (int64_t i = i0; i < i1; ++i) {
                const int64_t t0 = i * kTile, M = std::min(kTile, T_ - t0), MP = round_up(M, kPad);
                tile_mul_bf16(S, kTile, Qa + i * rows_size, hsP, Kt, ldN, M, N, hsP / 2);
                tile_mul_bf16(dP, kTile, dYa + i * rows_size, hsP, Vt, ldN, M, N, hsP / 2);
                for (int64_t r = 0; r < M; ++r) {
                  probs_and_score_grads_row(S + r * kTile, dP + r * kTile, std::clamp<int64_t>(t0 + r - s0 + 1, 0, N),
                                            N, scale, ls[t0 + r], D[t0 + r]);
                }
                pack_row_pairs(Pb + 2 * K2 * ldN, ldN, S, kTile, M, N, MP / 2);
                pack_row_pairs(dSb + 2 * K2 * ldN, ldN, dP, kTile, M, N, MP / 2);
                K2 += MP / 2;
                pack_rows(dSa, NP, dP, kTile, M, N);
                // dQ[M,hs] (+)= dS K: key tile 0 meets every query tile first
                tile_mac_bf16_form(form, dQ + t0 * hsC, hsC, dSa, NP, Kn, hsC, M, hs, NP / 2, j > 0);
              }
              // Over the group's queries at once (they are consecutive columns of Qt, dYt):
              const int64_t q0 = i0 * kTile;
              tile_mac_bf16_form(form, dVt, kTile, dYt + q0, Tp, Pb, ldN, hs, N, K2, i0 > j);  // dV^T[hs,N] (+)= dY^T P
              tile_mac_bf16_form(form, dKt, kTile, Qt + q0, Tp, dSb, ldN, hs, N, K2, i0 > j);  // dK^T[hs,N] (+)= Q^T dS
            }
            for (auto [acc_t, col] : {std::pair{dKt, hd.k(g)}, std::pair{dVt, hd.v(g)}}) {
              transpose32(back, hs, acc_t, kTile, hs, N);  // back[N, hs]
              float* d = dbase + s0 * W + col;
              for (int64_t n = 0; n < N; ++n) {
                float* row = d + n * W;
                const float* add = back + n * hs;
                if (first_head) {
                  std::copy(add, add + hs, row);
                } else {
#pragma omp simd
                  for (int64_t i = 0; i < hs; ++i) row[i] += add[i];
                }
              }
            }
          }
          for (int64_t t = 0; t < T_; ++t) std::copy(dQ + t * hsC, dQ + t * hsC + hs, dbase + t * W + hd.q(h));
        }
      }
    }
  }
}

}  // namespace tera::cpu
