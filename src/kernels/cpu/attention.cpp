// Causal multi-head self-attention on local heads (materialised probabilities).
// Per (b, h), with scale = 1/sqrt(hs) and s <= t only:
//   S[t,s] = scale * q_t . k_s;  P[t,:] = softmax(S[t,:]);  y_t = sum_s P[t,s] v_s
// Backward, with dP[t,s] = dy_t . v_s and dS = P * (dP - rowsum(P * dP)):
//   dv_s = sum_t P[t,s] dy_t;  dq_t = scale sum_s dS[t,s] k_s;  dk_s = scale sum_t dS[t,s] q_t
// qkv row layout [q(C) | k(C) | v(C)], head h at [h*hs, (h+1)*hs) of each part.
#include <cmath>
#include <vector>

#include "kernels/cpu/cpu_ops.h"
#include "kernels/cpu/vec_math.h"

namespace tera::cpu {

template <typename T>
void attention_forward(T* out, T* probs, const T* qkv, int64_t B, int64_t T_, int64_t C, int64_t H) {
  const int64_t hs = C / H, C3 = 3 * C;
  const T scale = static_cast<T>(1.0 / std::sqrt(static_cast<double>(hs)));
#pragma omp parallel for collapse(2) schedule(static)
  for (int64_t b = 0; b < B; ++b) {
    for (int64_t h = 0; h < H; ++h) {
      const T* base = qkv + b * T_ * C3;
      T* P = probs + (b * H + h) * T_ * T_;
      for (int64_t t = 0; t < T_; ++t) {
        const T* q = base + t * C3 + h * hs;
        T* prow = P + t * T_;
        T mx = -INFINITY;
        for (int64_t s = 0; s <= t; ++s) {
          const T* k = base + s * C3 + C + h * hs;
          T dot = 0;
#pragma omp simd reduction(+ : dot)
          for (int64_t i = 0; i < hs; ++i) dot += q[i] * k[i];
          prow[s] = dot * scale;
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
          const T* v = base + s * C3 + 2 * C + h * hs;
          const T p = prow[s];
#pragma omp simd
          for (int64_t i = 0; i < hs; ++i) y[i] += p * v[i];
        }
      }
    }
  }
}

template <typename T>
void attention_backward(T* dqkv, const T* dout, const T* qkv, const T* probs, int64_t B, int64_t T_, int64_t C,
                        int64_t H) {
  const int64_t hs = C / H, C3 = 3 * C;
  const T scale = static_cast<T>(1.0 / std::sqrt(static_cast<double>(hs)));
#pragma omp parallel
  {
    std::vector<T> dS(static_cast<size_t>(T_));
#pragma omp for collapse(2) schedule(static)
    for (int64_t b = 0; b < B; ++b) {
      for (int64_t h = 0; h < H; ++h) {
        const T* base = qkv + b * T_ * C3;
        T* dbase = dqkv + b * T_ * C3;
        const T* P = probs + (b * H + h) * T_ * T_;
        for (int64_t t = 0; t < T_; ++t) {
          T* dq = dbase + t * C3 + h * hs;
          T* dk = dq + C;
          T* dv = dq + 2 * C;
          for (int64_t i = 0; i < hs; ++i) dq[i] = dk[i] = dv[i] = 0;
        }
        for (int64_t t = 0; t < T_; ++t) {
          const T* prow = P + t * T_;
          const T* dy = dout + (b * T_ + t) * C + h * hs;
          const T* q = base + t * C3 + h * hs;
          T* dq = dbase + t * C3 + h * hs;
          T rowsum = 0;
          for (int64_t s = 0; s <= t; ++s) {
            const T* v = base + s * C3 + 2 * C + h * hs;
            T dp = 0;
#pragma omp simd reduction(+ : dp)
            for (int64_t i = 0; i < hs; ++i) dp += dy[i] * v[i];
            dS[s] = dp;
            rowsum += prow[s] * dp;
          }
          for (int64_t s = 0; s <= t; ++s) {
            const T ds = prow[s] * (dS[s] - rowsum) * scale;
            const T* k = base + s * C3 + C + h * hs;
            T* dk = dbase + s * C3 + C + h * hs;
            T* dv = dbase + s * C3 + 2 * C + h * hs;
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

template void attention_forward<float>(float*, float*, const float*, int64_t, int64_t, int64_t, int64_t);
template void attention_forward<double>(double*, double*, const double*, int64_t, int64_t, int64_t, int64_t);
template void attention_backward<float>(float*, const float*, const float*, const float*, int64_t, int64_t,
                                        int64_t, int64_t);
template void attention_backward<double>(double*, const double*, const double*, const double*, int64_t, int64_t,
                                         int64_t, int64_t);

}  // namespace tera::cpu
