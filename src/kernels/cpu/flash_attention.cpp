// The CPU backend's fp32 flash attention (ops.h FlashAttention*Fn), in
// tiles of 64 queries x 64 keys whose products run on tile_mac_f32
// (tile_mac.h); the bf16 kernels are flash_attention_bf16.cpp.
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
#include "kernels/cpu/tile_mac.h"

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
#pragma omp parallel
  {
    std::vector<float> S_(kTile * kTile), Kt_(kTile * hs), acc_(kTile * hs), m_(kTile), l_(kTile);
    float *S = S_.data(), *Kt = Kt_.data(), *acc = acc_.data(), *m = m_.data(), *l = l_.data();
#pragma omp for collapse(3) schedule(dynamic)
    for (int64_t b = 0; b < B; ++b) {
      for (int64_t h = 0; h < H; ++h) {
        for (int64_t qt = tiles - 1; qt >= 0; --qt) {  // longest tasks first
          const int64_t g = h / hd.group(), t0 = qt * kTile, M = std::min(kTile, T_ - t0);
          const float* base = qkv + b * T_ * W;
          const float* Q = base + t0 * W + hd.q(h);
          std::fill(acc, acc + M * hs, 0.0f);
          std::fill(m, m + M, -INFINITY);
          std::fill(l, l + M, 0.0f);
          for (int64_t s0 = 0; s0 <= t0; s0 += kTile) {
            const int64_t N = std::min(kTile, t0 + M - s0);
            const float* K = base + s0 * W + hd.k(g);
            const float* V = base + s0 * W + hd.v(g);
            std::fill(S, S + M * kTile, 0.0f);
            for (int64_t n = 0; n < N; ++n) {
              for (int64_t i = 0; i < hs; ++i) Kt[i * kTile + n] = K[n * W + i];
            }
            tile_mac_f32(S, kTile, Q, W, Kt, kTile, M, N, hs);
            for (int64_t r = 0; r < M; ++r) {
              const float corr = online_softmax_row(S + r * kTile, std::min(N, t0 + r - s0 + 1), N, scale, m[r], l[r]);
              float* a = acc + r * hs;
#pragma omp simd
              for (int64_t i = 0; i < hs; ++i) a[i] *= corr;
            }
            tile_mac_f32(acc, hs, S, kTile, V, W, M, hs, N);
          }
          for (int64_t r = 0; r < M; ++r) {
            finish_row(out + (b * T_ + t0 + r) * C + h * hs, acc + r * hs, hs, m[r], l[r],
                       &lse[(b * H + h) * T_ + t0 + r]);
          }
        }
      }
    }
  }
}

void flash_attention_backward_f32(float* dqkv, const float* dout, const float* qkv, const float* out,
                                  const float* lse, int64_t B, int64_t T_, int64_t H, int64_t KV, int64_t hs) {
  const AttentionHeads hd{H, KV, hs};
  const int64_t W = hd.width(), C = H * hs;
  const float scale = attention_scale<float>(hs);
#pragma omp parallel
  {
    std::vector<float> S_(kTile * kTile), dP_(kTile * kTile), PT_(kTile * kTile), dST_(kTile * kTile),
        Kt_(kTile * hs), Vt_(kTile * hs), D_(static_cast<size_t>(T_));
    float *S = S_.data(), *dP = dP_.data(), *PT = PT_.data(), *dST = dST_.data(), *Kt = Kt_.data(),
          *Vt = Vt_.data(), *D = D_.data();
#pragma omp for collapse(2) schedule(dynamic)
    for (int64_t b = 0; b < B; ++b) {
      for (int64_t g = 0; g < KV; ++g) {
        const float* base = qkv + b * T_ * W;
        float* dbase = dqkv + b * T_ * W;
        zero_group_grads(dbase, hd, g, T_);
        for (int64_t h = g * hd.group(); h < (g + 1) * hd.group(); ++h) {
          const float* ls = lse + (b * H + h) * T_;
          for (int64_t t = 0; t < T_; ++t) {  // D_t = dy_t . y_t = rowsum(P * dP)
            const float* dy = dout + (b * T_ + t) * C + h * hs;
            const float* y = out + (b * T_ + t) * C + h * hs;
            float d = 0;
#pragma omp simd reduction(+ : d)
            for (int64_t i = 0; i < hs; ++i) d += dy[i] * y[i];
            D[t] = d;
          }
          for (int64_t s0 = 0; s0 < T_; s0 += kTile) {
            const int64_t N = std::min(kTile, T_ - s0);
            const float* K = base + s0 * W + hd.k(g);
            const float* V = base + s0 * W + hd.v(g);
            float* dK = dbase + s0 * W + hd.k(g);
            float* dV = dbase + s0 * W + hd.v(g);
            for (int64_t n = 0; n < N; ++n) {
              for (int64_t i = 0; i < hs; ++i) {
                Kt[i * kTile + n] = K[n * W + i];
                Vt[i * kTile + n] = V[n * W + i];
              }
            }
            for (int64_t t0 = s0; t0 < T_; t0 += kTile) {
              const int64_t M = std::min(kTile, T_ - t0);
              const float* Q = base + t0 * W + hd.q(h);
              const float* dY = dout + (b * T_ + t0) * C + h * hs;
              float* dQ = dbase + t0 * W + hd.q(h);
              std::fill(S, S + M * kTile, 0.0f);
              std::fill(dP, dP + M * kTile, 0.0f);
              tile_mac_f32(S, kTile, Q, W, Kt, kTile, M, N, hs);
              tile_mac_f32(dP, kTile, dY, C, Vt, kTile, M, N, hs);
              // P and dS in place of S and dP, and their transposes for dV and dK.
              for (int64_t r = 0; r < M; ++r) {
                float *srow = S + r * kTile, *dprow = dP + r * kTile;
                probs_and_score_grads_row(srow, dprow, std::clamp<int64_t>(t0 + r - s0 + 1, 0, N), N, scale,
                                          ls[t0 + r], D[t0 + r]);
                for (int64_t n = 0; n < N; ++n) {
                  PT[n * kTile + r] = srow[n];
                  dST[n * kTile + r] = dprow[n];
                }
              }
              tile_mac_f32(dV, W, PT, kTile, dY, C, N, hs, M);
              tile_mac_f32(dK, W, dST, kTile, Q, W, N, hs, M);
              tile_mac_f32(dQ, W, dP, kTile, K, W, M, hs, N);
            }
          }
        }
      }
    }
  }
}

}  // namespace tera::cpu
