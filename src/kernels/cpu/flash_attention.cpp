// The CPU backend's flash attention (ops.h FlashAttention*Fn), in tiles of
// 64 queries x 64 keys whose products run on tile_mac (tile_mac.h):
//
// forward, one task per (b, h, query tile) of M rows:
//   S[M,N]  = Q K^T                    (per key tile of N keys up to the diagonal)
//   online softmax on S * scale: running max m and sum l per row; the row's
//   accumulator is rescaled by exp(m_old - m_new)
//   acc    += P V;   y = acc / l,  lse = m + log l
// backward, one task per (b, key/value group g), so each gradient row is
// written by one thread in a fixed order (deterministic, no atomics); per
// query head h of the group, key tile j and query tile i >= j:
//   P  = exp(scale Q K^T - lse)    dP = dY V^T    dS = P (dP - D) scale,
//   D_t = dy_t . y_t;   dV += P^T dY,  dK += dS^T Q,  dQ += dS K
//
// fp32: every product in fp32. bf16 (train.precision = "bf16"): qkv and
// the output the backward reads are kept in bf16, the operands of each product are bf16 as they are packed
// into a tile (q, k, v; dy, and P and dS rounded before they multiply) and the products
// accumulate in fp32, as a GPU flash attention's bf16 tensor-core products
// do; the online softmax, lse, D and every sum stay fp32.
//
// The scalar fp64 kernels in attention.cpp are the reference these are
// tested against (tests/kernels/test_conformance.cpp).
#include <algorithm>
#include <cmath>
#include <type_traits>
#include <vector>

#include "kernels/cpu/attention_heads.h"
#include "kernels/cpu/bf16.h"
#include "kernels/cpu/cpu_ops.h"
#include "kernels/cpu/tile_mac.h"
#include "kernels/cpu/vec_math.h"

namespace tera::cpu {

namespace {

constexpr int64_t kTile = 64;  // query rows and keys per tile

int64_t even(int64_t n) { return (n + 1) / 2 * 2; }

// Packs the bf16 A operand of tile_mac_bf16: rows x cols values at(r, c),
// each row padded with zeros to an even length ld.
template <typename At>
void pack_rows(uint16_t* dst, int64_t ld, int64_t rows, int64_t cols, At at) {
  for (int64_t r = 0; r < rows; ++r) {
    for (int64_t c = 0; c < cols; ++c) dst[r * ld + c] = to_bf16(at(r, c));
    for (int64_t c = cols; c < ld; ++c) dst[r * ld + c] = 0;
  }
}

// Packs the bf16 B operand of tile_mac_bf16 for B(k, n) = at(k, n), k < K,
// n < N: pairs along k, ldb = N pairs; a missing odd k is zero.
template <typename At>
void pack_pairs(uint16_t* dst, int64_t K, int64_t N, At at) {
  for (int64_t k2 = 0; k2 < (K + 1) / 2; ++k2) {
    const int64_t k = 2 * k2;
    for (int64_t n = 0; n < N; ++n) {
      dst[2 * (k2 * N + n)] = to_bf16(at(k, n));
      dst[2 * (k2 * N + n) + 1] = k + 1 < K ? to_bf16(at(k + 1, n)) : uint16_t(0);
    }
  }
}

// Thread-local tiles, sized for head size hs.
struct Tiles {
  std::vector<float> S, dP, PT, dST, Kt, Vt, acc, m, l, D;
  std::vector<uint16_t> a0, a1, a2, b0, b1, b2, b3, b4;
  Tiles(int64_t hs, int64_t T_) {
    const size_t t2 = kTile * kTile, th = static_cast<size_t>(kTile * even(hs));
    for (auto* v : {&S, &dP, &PT, &dST}) v->resize(t2);
    for (auto* v : {&Kt, &Vt, &acc}) v->resize(th);
    m.resize(kTile), l.resize(kTile), D.resize(static_cast<size_t>(T_));
    for (auto* v : {&a0, &a1, &a2}) v->resize(std::max(t2, th));
    for (auto* v : {&b0, &b1, &b2, &b3, &b4}) v->resize(std::max(t2, th) + 2 * kTile);
  }
};

// Qkv: the storage of qkv, float (every product fp32) or bf16 (uint16_t:
// train.precision = "bf16", bf16 operands).
template <typename Qkv>
void forward(float* out, float* lse, const Qkv* qkv, int64_t B, int64_t T_, int64_t H, int64_t KV, int64_t hs) {
  constexpr bool kBf16 = std::is_same_v<Qkv, uint16_t>;
  auto ld = [](const Qkv* p, int64_t i) { return load_as<float>(p, i); };
  const AttentionHeads hd{H, KV, hs};
  const int64_t W = hd.width(), C = H * hs, hsE = even(hs);
  const float scale = attention_scale<float>(hs);
  const int64_t tiles = (T_ + kTile - 1) / kTile;
#pragma omp parallel
  {
    Tiles tl(hs, T_);
    float *S = tl.S.data(), *acc = tl.acc.data(), *m = tl.m.data(), *l = tl.l.data();
#pragma omp for collapse(3) schedule(dynamic)
    for (int64_t b = 0; b < B; ++b) {
      for (int64_t h = 0; h < H; ++h) {
        for (int64_t qt = tiles - 1; qt >= 0; --qt) {  // longest tasks first
          const int64_t g = h / hd.group(), t0 = qt * kTile, M = std::min(kTile, T_ - t0);
          const Qkv* base = qkv + b * T_ * W;
          const Qkv* Q = base + t0 * W + hd.q(h);
          uint16_t* Qb = tl.a0.data();
          if constexpr (kBf16) pack_rows(Qb, hsE, M, hs, [&](int64_t r, int64_t i) { return ld(Q, r * W + i); });
          std::fill(acc, acc + M * hs, 0.0f);
          std::fill(m, m + M, -INFINITY);
          std::fill(l, l + M, 0.0f);
          for (int64_t s0 = 0; s0 <= t0; s0 += kTile) {
            const int64_t N = std::min(kTile, t0 + M - s0);
            const Qkv* K = base + s0 * W + hd.k(g);
            const Qkv* V = base + s0 * W + hd.v(g);
            std::fill(S, S + M * kTile, 0.0f);
            if constexpr (kBf16) {
              uint16_t* Kp = tl.b0.data();
              pack_pairs(Kp, hs, N, [&](int64_t i, int64_t n) { return ld(K, n * W + i); });
              tile_mac_bf16(S, kTile, Qb, hsE, Kp, N, M, N, hsE / 2);
            } else {
              float* Kt = tl.Kt.data();
              for (int64_t n = 0; n < N; ++n) {
                for (int64_t i = 0; i < hs; ++i) Kt[i * kTile + n] = K[n * W + i];
              }
              tile_mac_f32(S, kTile, Q, W, Kt, kTile, M, N, hs);
            }
            // Online softmax over the tile's keys s <= t.
            for (int64_t r = 0; r < M; ++r) {
              float* row = S + r * kTile;
              const int64_t valid = std::min(N, t0 + r - s0 + 1);
              float mx = m[r];
              for (int64_t n = 0; n < valid; ++n) mx = std::max(mx, row[n] * scale);
              const float corr = exp_v<float>(m[r] - mx);
              float sum = 0;
#pragma omp simd reduction(+ : sum)
              for (int64_t n = 0; n < valid; ++n) {
                row[n] = exp_v<float>(row[n] * scale - mx);
                sum += row[n];
              }
              for (int64_t n = valid; n < N; ++n) row[n] = 0;
              l[r] = l[r] * corr + sum;
              m[r] = mx;
              float* a = acc + r * hs;
#pragma omp simd
              for (int64_t i = 0; i < hs; ++i) a[i] *= corr;
            }
            if constexpr (kBf16) {
              const int64_t NE = even(N);
              uint16_t *Pb = tl.a1.data(), *Vp = tl.b1.data();
              pack_rows(Pb, NE, M, N, [&](int64_t r, int64_t n) { return S[r * kTile + n]; });
              pack_pairs(Vp, N, hs, [&](int64_t n, int64_t i) { return ld(V, n * W + i); });
              tile_mac_bf16(acc, hs, Pb, NE, Vp, hs, M, hs, NE / 2);
            } else {
              tile_mac_f32(acc, hs, S, kTile, V, W, M, hs, N);
            }
          }
          for (int64_t r = 0; r < M; ++r) {
            const float inv = 1.0f / l[r];
            float* y = out + (b * T_ + t0 + r) * C + h * hs;
            const float* a = acc + r * hs;
#pragma omp simd
            for (int64_t i = 0; i < hs; ++i) y[i] = a[i] * inv;
            lse[(b * H + h) * T_ + t0 + r] = m[r] + std::log(l[r]);
          }
        }
      }
    }
  }
}

template <typename Qkv>
void backward(float* dqkv, const float* dout, const Qkv* qkv, const Qkv* out, const float* lse, int64_t B,
              int64_t T_, int64_t H, int64_t KV, int64_t hs) {
  constexpr bool kBf16 = std::is_same_v<Qkv, uint16_t>;
  auto ld = [](const Qkv* p, int64_t i) { return load_as<float>(p, i); };
  const AttentionHeads hd{H, KV, hs};
  const int64_t W = hd.width(), C = H * hs, hsE = even(hs);
  const float scale = attention_scale<float>(hs);
#pragma omp parallel
  {
    Tiles tl(hs, T_);
    float *S = tl.S.data(), *dP = tl.dP.data(), *PT = tl.PT.data(), *dST = tl.dST.data(), *D = tl.D.data();
#pragma omp for collapse(2) schedule(dynamic)
    for (int64_t b = 0; b < B; ++b) {
      for (int64_t g = 0; g < KV; ++g) {
        const Qkv* base = qkv + b * T_ * W;
        float* dbase = dqkv + b * T_ * W;
        zero_group_grads(dbase, hd, g, T_);
        for (int64_t h = g * hd.group(); h < (g + 1) * hd.group(); ++h) {
          const float* ls = lse + (b * H + h) * T_;
          for (int64_t t = 0; t < T_; ++t) {  // D_t = dy_t . y_t = rowsum(P * dP)
            const float* dy = dout + (b * T_ + t) * C + h * hs;
            const Qkv* y = out + (b * T_ + t) * C + h * hs;
            float d = 0;
#pragma omp simd reduction(+ : d)
            for (int64_t i = 0; i < hs; ++i) d += dy[i] * ld(y, i);
            D[t] = d;
          }
          for (int64_t s0 = 0; s0 < T_; s0 += kTile) {
            const int64_t N = std::min(kTile, T_ - s0), NE = even(N);
            const Qkv* K = base + s0 * W + hd.k(g);
            const Qkv* V = base + s0 * W + hd.v(g);
            float* dK = dbase + s0 * W + hd.k(g);
            float* dV = dbase + s0 * W + hd.v(g);
            uint16_t *Kp = tl.b0.data(), *Vp = tl.b1.data(), *Kn = tl.b2.data();
            if constexpr (kBf16) {
              pack_pairs(Kp, hs, N, [&](int64_t i, int64_t n) { return ld(K, n * W + i); });  // S = Q K^T
              pack_pairs(Vp, hs, N, [&](int64_t i, int64_t n) { return ld(V, n * W + i); });  // dP = dY V^T
              pack_pairs(Kn, N, hs, [&](int64_t n, int64_t i) { return ld(K, n * W + i); });  // dQ = dS K
            } else {
              for (int64_t n = 0; n < N; ++n) {
                for (int64_t i = 0; i < hs; ++i) {
                  tl.Kt[static_cast<size_t>(i * kTile + n)] = K[n * W + i];
                  tl.Vt[static_cast<size_t>(i * kTile + n)] = V[n * W + i];
                }
              }
            }
            for (int64_t t0 = s0; t0 < T_; t0 += kTile) {
              const int64_t M = std::min(kTile, T_ - t0), ME = even(M);
              const Qkv* Q = base + t0 * W + hd.q(h);
              const float* dY = dout + (b * T_ + t0) * C + h * hs;
              float* dQ = dbase + t0 * W + hd.q(h);
              std::fill(S, S + M * kTile, 0.0f);
              std::fill(dP, dP + M * kTile, 0.0f);
              uint16_t *Qb = tl.a0.data(), *dYb = tl.a1.data(), *Qn = tl.b3.data(), *dYn = tl.b4.data();
              if constexpr (kBf16) {
                pack_rows(Qb, hsE, M, hs, [&](int64_t r, int64_t i) { return ld(Q, r * W + i); });
                pack_rows(dYb, hsE, M, hs, [&](int64_t r, int64_t i) { return dY[r * C + i]; });
                tile_mac_bf16(S, kTile, Qb, hsE, Kp, N, M, N, hsE / 2);
                tile_mac_bf16(dP, kTile, dYb, hsE, Vp, N, M, N, hsE / 2);
              } else {
                tile_mac_f32(S, kTile, Q, W, tl.Kt.data(), kTile, M, N, hs);
                tile_mac_f32(dP, kTile, dY, C, tl.Vt.data(), kTile, M, N, hs);
              }
              // P and dS in place of S and dP (fp32: and their transposes for dV and dK).
              for (int64_t r = 0; r < M; ++r) {
                const int64_t valid = std::clamp<int64_t>(t0 + r - s0 + 1, 0, N);
                const float lr = ls[t0 + r], dr = D[t0 + r];
                float *srow = S + r * kTile, *dprow = dP + r * kTile;
                for (int64_t n = 0; n < valid; ++n) {
                  const float p = exp_v<float>(srow[n] * scale - lr);
                  srow[n] = p;
                  dprow[n] = p * (dprow[n] - dr) * scale;
                }
                for (int64_t n = valid; n < N; ++n) srow[n] = dprow[n] = 0;
                if constexpr (!kBf16) {
                  for (int64_t n = 0; n < N; ++n) {
                    PT[n * kTile + r] = srow[n];
                    dST[n * kTile + r] = dprow[n];
                  }
                }
              }
              if constexpr (kBf16) {
                uint16_t *PTb = tl.a0.data(), *dSTb = tl.a1.data(), *dSb = tl.a2.data();
                pack_pairs(Qn, M, hs, [&](int64_t r, int64_t i) { return ld(Q, r * W + i); });
                pack_pairs(dYn, M, hs, [&](int64_t r, int64_t i) { return dY[r * C + i]; });
                // The transposes of P and dS, rounded as they are packed.
                pack_rows(PTb, ME, N, M, [&](int64_t n, int64_t r) { return S[r * kTile + n]; });
                pack_rows(dSTb, ME, N, M, [&](int64_t n, int64_t r) { return dP[r * kTile + n]; });
                pack_rows(dSb, NE, M, N, [&](int64_t r, int64_t n) { return dP[r * kTile + n]; });
                tile_mac_bf16(dV, W, PTb, ME, dYn, hs, N, hs, ME / 2);
                tile_mac_bf16(dK, W, dSTb, ME, Qn, hs, N, hs, ME / 2);
                tile_mac_bf16(dQ, W, dSb, NE, Kn, hs, M, hs, NE / 2);
              } else {
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
}

}  // namespace

void flash_attention_forward_f32(float* out, float* lse, const float* qkv, int64_t B, int64_t T_, int64_t H,
                                 int64_t KV, int64_t hs) {
  forward<float>(out, lse, qkv, B, T_, H, KV, hs);
}
void flash_attention_backward_f32(float* dqkv, const float* dout, const float* qkv, const float* out,
                                  const float* lse, int64_t B, int64_t T_, int64_t H, int64_t KV, int64_t hs) {
  backward<float>(dqkv, dout, qkv, out, lse, B, T_, H, KV, hs);
}
void flash_attention_forward_bf16(float* out, float* lse, const uint16_t* qkv, int64_t B, int64_t T_, int64_t H,
                                  int64_t KV, int64_t hs) {
  forward<uint16_t>(out, lse, qkv, B, T_, H, KV, hs);
}
void flash_attention_backward_bf16(float* dqkv, const float* dout, const uint16_t* qkv, const uint16_t* out,
                                   const float* lse, int64_t B, int64_t T_, int64_t H, int64_t KV, int64_t hs) {
  backward<uint16_t>(dqkv, dout, qkv, out, lse, B, T_, H, KV, hs);
}

}  // namespace tera::cpu
