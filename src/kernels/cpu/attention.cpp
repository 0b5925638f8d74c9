// Causal self-attention on local heads, with grouped keys and values (ops.h).
// Per (b, query head h, its key/value head g = h / (H/KV)), with
// scale = 1/sqrt(hs) and s <= t only:
//   S[t,s] = scale * q_t . k_s;  P[t,:] = softmax(S[t,:]);  y_t = sum_s P[t,s] v_s
// Backward, with dP[t,s] = dy_t . v_s and dS = P * (dP - rowsum(P * dP)):
//   dv_s = sum_t P[t,s] dy_t;  dq_t = scale sum_s dS[t,s] k_s;  dk_s = scale sum_t dS[t,s] q_t
// where the sums for dk and dv also run over the query heads of the group.
// rowsum(P * dP) = dy_t . y_t, which is how the flash backward gets it
// without the probabilities.
//
// naive keeps P [B,H,T,T]. flash (Dao et al. 2022) walks key tiles with an
// online softmax (running max m and sum l, rescaling the accumulated output
// by exp(m_old - m_new)) and keeps only lse_t = m_t + log l_t; its backward
// recomputes P[t,s] = exp(S[t,s] - lse_t) one key at a time. Both backwards
// run one task per (b, g), so the key/value gradients of a group are summed
// by one thread in a fixed order (deterministic, no atomics). The flash
// kernels here are instantiated for double only, as the reference; the
// backend's fp32 and bf16 flash kernels are the tiled ones of
// flash_attention.cpp.
#include <algorithm>
#include <cmath>
#include <vector>

#include "kernels/cpu/attention_heads.h"
#include "kernels/cpu/cpu_ops.h"
#include "kernels/cpu/vec_math.h"

namespace tera::cpu {

namespace {

using Heads = AttentionHeads;

template <typename T>
T scale_of(int64_t hs) {
  return attention_scale<T>(hs);
}

constexpr int64_t kTileQ = 32;  // query rows per flash task
constexpr int64_t kTileK = 64;  // keys per flash tile

}  // namespace

template <typename T>
void attention_forward(T* out, T* probs, const T* qkv, int64_t B, int64_t T_, int64_t H, int64_t KV, int64_t hs) {
  const Heads hd{H, KV, hs};
  const int64_t W = hd.width(), C = H * hs;
  const T scale = scale_of<T>(hs);
#pragma omp parallel for collapse(2) schedule(static)
  for (int64_t b = 0; b < B; ++b) {
    for (int64_t h = 0; h < H; ++h) {
      const int64_t g = h / hd.group();
      const T* base = qkv + b * T_ * W;
      T* P = probs + (b * H + h) * T_ * T_;
      for (int64_t t = 0; t < T_; ++t) {
        const T* q = base + t * W + hd.q(h);
        T* prow = P + t * T_;
        T mx = -INFINITY;
        for (int64_t s = 0; s <= t; ++s) {
          prow[s] = dot(q, base + s * W + hd.k(g), hs) * scale;
          mx = prow[s] > mx ? prow[s] : mx;
        }
        T sum = 0;
#pragma omp simd reduction(+ : sum)
        for (int64_t s = 0; s <= t; ++s) {
          prow[s] = exp_v<T>(prow[s] - mx);
          sum += prow[s];
        }
        const T inv = T(1) / sum;
#pragma omp simd
        for (int64_t s = 0; s <= t; ++s) prow[s] *= inv;
        for (int64_t s = t + 1; s < T_; ++s) prow[s] = 0;
        T* y = out + (b * T_ + t) * C + h * hs;
        for (int64_t i = 0; i < hs; ++i) y[i] = 0;
        for (int64_t s = 0; s <= t; ++s) {
          const T* v = base + s * W + hd.v(g);
          const T p = prow[s];
#pragma omp simd
          for (int64_t i = 0; i < hs; ++i) y[i] += p * v[i];
        }
      }
    }
  }
}

template <typename T>
void attention_backward(T* dqkv, const T* dout, const T* qkv, const T* probs, int64_t B, int64_t T_, int64_t H,
                        int64_t KV, int64_t hs) {
  const Heads hd{H, KV, hs};
  const int64_t W = hd.width(), C = H * hs;
  const T scale = scale_of<T>(hs);
#pragma omp parallel
  {
    std::vector<T> dP(static_cast<size_t>(T_));
#pragma omp for collapse(2) schedule(static)
    for (int64_t b = 0; b < B; ++b) {
      for (int64_t g = 0; g < KV; ++g) {
        const T* base = qkv + b * T_ * W;
        T* dbase = dqkv + b * T_ * W;
        zero_group_grads(dbase, hd, g, T_);
        for (int64_t h = g * hd.group(); h < (g + 1) * hd.group(); ++h) {
          const T* P = probs + (b * H + h) * T_ * T_;
          for (int64_t t = 0; t < T_; ++t) {
            const T* prow = P + t * T_;
            const T* dy = dout + (b * T_ + t) * C + h * hs;
            const T* q = base + t * W + hd.q(h);
            T* dq = dbase + t * W + hd.q(h);
            T rowsum = 0;
            for (int64_t s = 0; s <= t; ++s) {
              dP[static_cast<size_t>(s)] = dot(dy, base + s * W + hd.v(g), hs);
              rowsum += prow[s] * dP[static_cast<size_t>(s)];
            }
            for (int64_t s = 0; s <= t; ++s) {
              const T ds = prow[s] * (dP[static_cast<size_t>(s)] - rowsum) * scale;
              const T* k = base + s * W + hd.k(g);
              T* dk = dbase + s * W + hd.k(g);
              T* dv = dbase + s * W + hd.v(g);
              const T p = prow[s];
#pragma omp simd
              for (int64_t i = 0; i < hs; ++i) {
                dq[i] += ds * k[i];
                dk[i] += ds * q[i];
                dv[i] += p * dy[i];
              }
            }
          }
        }
      }
    }
  }
}

template <typename T>
void flash_attention_forward(T* out, T* lse, const T* qkv, int64_t B, int64_t T_, int64_t H, int64_t KV, int64_t hs) {
  const Heads hd{H, KV, hs};
  const int64_t W = hd.width(), C = H * hs;
  const T scale = scale_of<T>(hs);
  const int64_t tiles = (T_ + kTileQ - 1) / kTileQ;
#pragma omp parallel
  {
    std::vector<T> S(static_cast<size_t>(kTileK)), acc(static_cast<size_t>(kTileQ * hs));
    std::vector<T> m(static_cast<size_t>(kTileQ)), l(static_cast<size_t>(kTileQ));
#pragma omp for collapse(3) schedule(static)
    for (int64_t b = 0; b < B; ++b) {
      for (int64_t h = 0; h < H; ++h) {
        for (int64_t qt = 0; qt < tiles; ++qt) {
          const int64_t g = h / hd.group(), t0 = qt * kTileQ, t1 = std::min(T_, t0 + kTileQ);
          const T* base = qkv + b * T_ * W;
          std::fill(m.begin(), m.end(), static_cast<T>(-INFINITY));
          std::fill(l.begin(), l.end(), T(0));
          std::fill(acc.begin(), acc.end(), T(0));
          // Key tiles [s0, s0 + kTileK) up to the tile's last row; each row sees keys s <= t.
          for (int64_t s0 = 0; s0 < t1; s0 += kTileK) {
            for (int64_t t = std::max(t0, s0); t < t1; ++t) {
              const int64_t r = t - t0, s1 = std::min(s0 + kTileK, t + 1);
              const T* q = base + t * W + hd.q(h);
              T mx = m[static_cast<size_t>(r)];
              for (int64_t s = s0; s < s1; ++s) {
                S[static_cast<size_t>(s - s0)] = dot(q, base + s * W + hd.k(g), hs) * scale;
                mx = std::max(mx, S[static_cast<size_t>(s - s0)]);
              }
              // Rescale what this row accumulated so far to the new running max.
              const T corr = exp_v<T>(m[static_cast<size_t>(r)] - mx);
              T sum = 0;
              for (int64_t s = s0; s < s1; ++s) {
                S[static_cast<size_t>(s - s0)] = exp_v<T>(S[static_cast<size_t>(s - s0)] - mx);
                sum += S[static_cast<size_t>(s - s0)];
              }
              T* a = acc.data() + r * hs;
#pragma omp simd
              for (int64_t i = 0; i < hs; ++i) a[i] *= corr;
              for (int64_t s = s0; s < s1; ++s) {
                const T p = S[static_cast<size_t>(s - s0)];
                const T* v = base + s * W + hd.v(g);
#pragma omp simd
                for (int64_t i = 0; i < hs; ++i) a[i] += p * v[i];
              }
              l[static_cast<size_t>(r)] = l[static_cast<size_t>(r)] * corr + sum;
              m[static_cast<size_t>(r)] = mx;
            }
          }
          for (int64_t t = t0; t < t1; ++t) {
            const int64_t r = t - t0;
            const T inv = T(1) / l[static_cast<size_t>(r)];
            T* y = out + (b * T_ + t) * C + h * hs;
            const T* a = acc.data() + r * hs;
#pragma omp simd
            for (int64_t i = 0; i < hs; ++i) y[i] = a[i] * inv;
            lse[(b * H + h) * T_ + t] = m[static_cast<size_t>(r)] + std::log(l[static_cast<size_t>(r)]);
          }
        }
      }
    }
  }
}

template <typename T>
void flash_attention_backward(T* dqkv, const T* dout, const T* qkv, const T* out, const T* lse, int64_t B, int64_t T_,
                              int64_t H, int64_t KV, int64_t hs) {
  const Heads hd{H, KV, hs};
  const int64_t W = hd.width(), C = H * hs;
  const T scale = scale_of<T>(hs);
#pragma omp parallel for collapse(2) schedule(static)
  for (int64_t b = 0; b < B; ++b) {
    for (int64_t g = 0; g < KV; ++g) {
      const T* base = qkv + b * T_ * W;
      T* dbase = dqkv + b * T_ * W;
      zero_group_grads(dbase, hd, g, T_);
      for (int64_t h = g * hd.group(); h < (g + 1) * hd.group(); ++h) {
        for (int64_t t = 0; t < T_; ++t) {
          const T* q = base + t * W + hd.q(h);
          const T* dy = dout + (b * T_ + t) * C + h * hs;
          const T D = dot(dy, out + (b * T_ + t) * C + h * hs, hs);  // rowsum(P * dP)
          const T l = lse[(b * H + h) * T_ + t];
          T* dq = dbase + t * W + hd.q(h);
          for (int64_t s = 0; s <= t; ++s) {
            flash_pair_backward(dq, dbase + s * W + hd.k(g), dbase + s * W + hd.v(g), q, base + s * W + hd.k(g),
                                base + s * W + hd.v(g), dy, D, l, scale, hs);
          }
        }
      }
    }
  }
}

template void attention_forward<float>(float*, float*, const float*, int64_t, int64_t, int64_t, int64_t, int64_t);
template void attention_forward<double>(double*, double*, const double*, int64_t, int64_t, int64_t, int64_t, int64_t);
template void attention_backward<float>(float*, const float*, const float*, const float*, int64_t, int64_t, int64_t,
                                        int64_t, int64_t);
template void attention_backward<double>(double*, const double*, const double*, const double*, int64_t, int64_t,
                                         int64_t, int64_t, int64_t);
template void flash_attention_forward<double>(double*, double*, const double*, int64_t, int64_t, int64_t, int64_t,
                                              int64_t);
template void flash_attention_backward<double>(double*, const double*, const double*, const double*, const double*,
                                               int64_t, int64_t, int64_t, int64_t, int64_t);

}  // namespace tera::cpu
