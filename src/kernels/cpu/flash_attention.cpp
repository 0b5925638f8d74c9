// The CPU backend's fp32 flash attention (ops.h FlashAttention*Fn), in
// tiles of 64 queries x 64 keys whose products run on tile_mac_f32
// (tile_mac.h), one tile step each way in flash_tiles.h; the bf16 kernels
// are flash_attention_bf16.cpp.
//
// forward, one task per (b, h, query tile) of M rows:
//   S[M,N]  = Q K^T                    (per key tile of N keys up to the diagonal)
//   online softmax on S * scale: running max m and sum l per row; the row's
//   accumulator is rescaled by exp(m_old - m_new)      (flash_rows.h)
//   acc    += P V;   y = acc / l,  lse = m + log l
// backward, one task per (b, key/value group g), so each gradient row is
// written by one thread in a fixed order (deterministic, no atomics); per
// query head h of the group, key tile j and query tile i >= j:
//   P  = exp(scale Q K^T - lse)    dP = dY V^T    dS = P (dP - D) scale,
//   D_t = dy_t . y_t;   dV += P^T dY,  dK += dS^T Q,  dQ += dS K
//
// The scalar fp64 kernels in attention.cpp are the reference these are
// tested against (tests/kernels/test_conformance.cpp).
#include <algorithm>
#include <cmath>
#include <vector>

#include "kernels/cpu/attention_heads.h"
#include "kernels/cpu/cpu_ops.h"
#include "kernels/cpu/flash_rows.h"
#include "kernels/cpu/flash_tiles.h"

namespace tera::cpu {

namespace {

constexpr int64_t kTile = kFlashTile;

}  // namespace

void flash_attention_forward_f32(float* out, float* lse, const float* qkv, int64_t B, int64_t T_, int64_t H,
                                 int64_t KV, int64_t hs) {
  const AttentionHeads hd{H, KV, hs};
  const int64_t W = hd.width(), C = H * hs;
  const float scale = attention_scale<float>(hs);
  const int64_t tiles = (T_ + kTile - 1) / kTile;
  for_each_query_tile(B, H, tiles, hs, [&](FlashTileScratch& sc, int64_t b, int64_t h, int64_t qt) {
    float *acc = sc.acc.data(), *m = sc.m.data(), *l = sc.l.data();
    const int64_t g = h / hd.group(), t0 = qt * kTile, M = std::min(kTile, T_ - t0);
    const float* base = qkv + b * T_ * W;
    std::fill(acc, acc + M * hs, 0.0f);
    std::fill(m, m + M, -INFINITY);
    std::fill(l, l + M, 0.0f);
    for (int64_t s0 = 0; s0 <= t0; s0 += kTile) {
      const int64_t N = std::min(kTile, t0 + M - s0);
      flash_forward_tile(sc, base + t0 * W + hd.q(h), W, base + s0 * W + hd.k(g), base + s0 * W + hd.v(g), W, M, N, hs,
                         [&](int64_t r, float* row) {
                           return online_softmax_row(row, std::min(N, t0 + r - s0 + 1), N, scale, m[r], l[r]);
                         });
    }
    for (int64_t r = 0; r < M; ++r) {
      finish_row(out + (b * T_ + t0 + r) * C + h * hs, acc + r * hs, hs, m[r], l[r], &lse[(b * H + h) * T_ + t0 + r]);
    }
  });
}

void flash_attention_backward_f32(float* dqkv, const float* dout, const float* qkv, const float* out,
                                  const float* lse, int64_t B, int64_t T_, int64_t H, int64_t KV, int64_t hs) {
  const AttentionHeads hd{H, KV, hs};
  const int64_t W = hd.width(), C = H * hs;
  const float scale = attention_scale<float>(hs);
  for_each_kv_group(B, KV, T_, hs, [&](FlashTileScratch& sc, float* D, int64_t b, int64_t g) {
    const float* base = qkv + b * T_ * W;
    float* dbase = dqkv + b * T_ * W;
    zero_group_grads(dbase, hd, g, T_);
    for (int64_t h = g * hd.group(); h < (g + 1) * hd.group(); ++h) {
      const float* ls = lse + (b * H + h) * T_;
      output_grad_dots(D, dout + b * T_ * C + h * hs, out + b * T_ * C + h * hs, C, T_, hs);
      for (int64_t s0 = 0; s0 < T_; s0 += kTile) {
        const int64_t N = std::min(kTile, T_ - s0);
        const float* K = base + s0 * W + hd.k(g);
        transpose_tile(sc.Kt.data(), K, W, N, hs);
        transpose_tile(sc.Vt.data(), base + s0 * W + hd.v(g), W, N, hs);
        for (int64_t t0 = s0; t0 < T_; t0 += kTile) {
          const int64_t M = std::min(kTile, T_ - t0);
          flash_backward_tile(sc, dbase + t0 * W + hd.q(h), W, dbase + s0 * W + hd.k(g), dbase + s0 * W + hd.v(g),
                              W, base + t0 * W + hd.q(h), W, dout + (b * T_ + t0) * C + h * hs, C, K, W, M, N, hs,
                              [&](int64_t r, float* s, float* dp) {
                                probs_and_score_grads_row(s, dp, std::clamp<int64_t>(t0 + r - s0 + 1, 0, N), N,
                                                          scale, ls[t0 + r], D[t0 + r]);
                              });
        }
      }
    }
  });
}

}  // namespace tera::cpu
