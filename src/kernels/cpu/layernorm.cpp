// LayerNorm over the last dim, eps = 1e-5 (GPT-2 / PyTorch default).
// Forward saves mean and rstd = 1/sqrt(var + eps) per row; variance is the
// biased (population) variance, as torch.nn.LayerNorm uses. The _bf16 form
// writes out in bf16 (fp32 arithmetic and statistics).
// Backward (xhat = (x - mean) * rstd, dxhat = dout * g):
//   dx += rstd * (dxhat - mean(dxhat) - xhat * mean(dxhat * xhat))
//   dg += sum_rows dout * xhat,  db += sum_rows dout.
#include <cmath>
#include <vector>

#include <omp.h>

#include "kernels/cpu/bf16.h"
#include "kernels/cpu/cpu_ops.h"

namespace tera::cpu {

namespace {
constexpr double kLayerNormEps = 1e-5;

// Y: the storage of out (T, or bf16 rounded from T's arithmetic).
template <typename T, typename Y>
void layernorm_forward_impl(Y* out, T* mean, T* rstd, const T* x, const T* g, const T* b, int64_t N, int64_t C) {
#pragma omp parallel for schedule(static)
  for (int64_t n = 0; n < N; ++n) {
    const T* xr = x + n * C;
    Y* yr = out + n * C;
    T sum = 0;
#pragma omp simd reduction(+ : sum)
    for (int64_t c = 0; c < C; ++c) sum += xr[c];
    const T mu = sum / static_cast<T>(C);
    T sq = 0;
#pragma omp simd reduction(+ : sq)
    for (int64_t c = 0; c < C; ++c) sq += (xr[c] - mu) * (xr[c] - mu);
    const T rs = static_cast<T>(1.0 / std::sqrt(static_cast<double>(sq / static_cast<T>(C)) + kLayerNormEps));
#pragma omp simd
    for (int64_t c = 0; c < C; ++c) store_as(yr, c, (xr[c] - mu) * rs * g[c] + b[c]);
    mean[n] = mu;
    rstd[n] = rs;
  }
}
}  // namespace

template <typename T>
void layernorm_forward(T* out, T* mean, T* rstd, const T* x, const T* g, const T* b, int64_t N, int64_t C) {
  layernorm_forward_impl(out, mean, rstd, x, g, b, N, C);
}
void layernorm_forward_bf16(uint16_t* out, float* mean, float* rstd, const float* x, const float* g, const float* b,
                            int64_t N, int64_t C) {
  layernorm_forward_impl(out, mean, rstd, x, g, b, N, C);
}

template <typename T>
void layernorm_backward(T* dx, T* dg, T* db, const T* dout, const T* x, const T* g, const T* mean, const T* rstd,
                        int64_t N, int64_t C) {
  // dg/db are reduced over rows: each thread accumulates privately, then the
  // partials are added in thread order (deterministic for a fixed thread count).
  const int nt = omp_get_max_threads();
  std::vector<T> part(static_cast<size_t>(nt) * 2 * C, T(0));
#pragma omp parallel num_threads(nt)
  {
    T* pg = part.data() + static_cast<size_t>(omp_get_thread_num()) * 2 * C;
    T* pb = pg + C;
#pragma omp for schedule(static)
    for (int64_t n = 0; n < N; ++n) {
      const T* xr = x + n * C;
      const T* dyr = dout + n * C;
      T* dxr = dx + n * C;
      const T mu = mean[n], rs = rstd[n];
      T mean_dxhat = 0, mean_dxhat_xhat = 0;
#pragma omp simd reduction(+ : mean_dxhat, mean_dxhat_xhat)
      for (int64_t c = 0; c < C; ++c) {
        const T xhat = (xr[c] - mu) * rs;
        const T dxhat = dyr[c] * g[c];
        mean_dxhat += dxhat;
        mean_dxhat_xhat += dxhat * xhat;
      }
      mean_dxhat /= static_cast<T>(C);
      mean_dxhat_xhat /= static_cast<T>(C);
#pragma omp simd
      for (int64_t c = 0; c < C; ++c) {
        const T xhat = (xr[c] - mu) * rs;
        const T dxhat = dyr[c] * g[c];
        dxr[c] += rs * (dxhat - mean_dxhat - xhat * mean_dxhat_xhat);
        pg[c] += dyr[c] * xhat;
        pb[c] += dyr[c];
      }
    }
  }
  for (int t = 0; t < nt; ++t) {
    const T* pg = part.data() + static_cast<size_t>(t) * 2 * C;
    const T* pb = pg + C;
    for (int64_t c = 0; c < C; ++c) {
      dg[c] += pg[c];
      db[c] += pb[c];
    }
  }
}

template void layernorm_forward<float>(float*, float*, float*, const float*, const float*, const float*, int64_t,
                                       int64_t);
template void layernorm_forward<double>(double*, double*, double*, const double*, const double*, const double*,
                                        int64_t, int64_t);
template void layernorm_backward<float>(float*, float*, float*, const float*, const float*, const float*,
                                        const float*, const float*, int64_t, int64_t);
template void layernorm_backward<double>(double*, double*, double*, const double*, const double*, const double*,
                                         const double*, const double*, int64_t, int64_t);

}  // namespace tera::cpu
