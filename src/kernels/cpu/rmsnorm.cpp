// RMSNorm over the last dim (Zhang & Sennrich 2019; Llama): no mean, no bias.
// Forward saves rstd = 1/sqrt(mean(x^2) + eps) per row: out = x * rstd * g.
// Backward (xhat = x * rstd, dxhat = dout * g):
//   dx += rstd * (dxhat - xhat * mean(dxhat * xhat)),   dg += sum_rows dout * xhat.
// eps is the model's (model.norm_eps: Llama's rms_norm_eps), added in double
// as Hugging Face's LlamaRMSNorm adds it to the fp32 mean of squares. The
// _bf16 form writes out in bf16 (fp32 arithmetic and rstd).
#include <cmath>
#include <vector>

#include <omp.h>

#include "kernels/cpu/bf16.h"
#include "kernels/cpu/cpu_ops.h"

namespace tera::cpu {

namespace {
// Y: the storage of out (T, or bf16 rounded from T's arithmetic).
template <typename T, typename Y>
void rmsnorm_forward_impl(Y* out, T* rstd, const T* x, const T* g, int64_t N, int64_t C, float eps) {
#pragma omp parallel for schedule(static)
  for (int64_t n = 0; n < N; ++n) {
    const T* xr = x + n * C;
    Y* yr = out + n * C;
    T sq = 0;
#pragma omp simd reduction(+ : sq)
    for (int64_t c = 0; c < C; ++c) sq += xr[c] * xr[c];
    const T rs = static_cast<T>(1.0 / std::sqrt(static_cast<double>(sq / static_cast<T>(C)) + static_cast<double>(eps)));
#pragma omp simd
    for (int64_t c = 0; c < C; ++c) store_as(yr, c, xr[c] * rs * g[c]);
    rstd[n] = rs;
  }
}
}  // namespace

template <typename T>
void rmsnorm_forward(T* out, T* rstd, const T* x, const T* g, int64_t N, int64_t C, float eps) {
  rmsnorm_forward_impl(out, rstd, x, g, N, C, eps);
}
void rmsnorm_forward_bf16(uint16_t* out, float* rstd, const float* x, const float* g, int64_t N, int64_t C,
                          float eps) {
  rmsnorm_forward_impl(out, rstd, x, g, N, C, eps);
}

template <typename T>
void rmsnorm_backward(T* dx, T* dg, const T* dout, const T* x, const T* g, const T* rstd, int64_t N, int64_t C) {
  // dg is reduced over rows: private partials added in thread order (deterministic).
  const int nt = omp_get_max_threads();
  std::vector<T> part(static_cast<size_t>(nt) * C, T(0));
#pragma omp parallel num_threads(nt)
  {
    T* pg = part.data() + static_cast<size_t>(omp_get_thread_num()) * C;
#pragma omp for schedule(static)
    for (int64_t n = 0; n < N; ++n) {
      const T* xr = x + n * C;
      const T* dyr = dout + n * C;
      T* dxr = dx + n * C;
      const T rs = rstd[n];
      T mean_dxhat_xhat = 0;
#pragma omp simd reduction(+ : mean_dxhat_xhat)
      for (int64_t c = 0; c < C; ++c) mean_dxhat_xhat += dyr[c] * g[c] * xr[c] * rs;
      mean_dxhat_xhat /= static_cast<T>(C);
#pragma omp simd
      for (int64_t c = 0; c < C; ++c) {
        const T xhat = xr[c] * rs;
        dxr[c] += rs * (dyr[c] * g[c] - xhat * mean_dxhat_xhat);
        pg[c] += dyr[c] * xhat;
      }
    }
  }
  for (int t = 0; t < nt; ++t) {
    const T* pg = part.data() + static_cast<size_t>(t) * C;
    for (int64_t c = 0; c < C; ++c) dg[c] += pg[c];
  }
}

template void rmsnorm_forward<float>(float*, float*, const float*, const float*, int64_t, int64_t, float);
template void rmsnorm_forward<double>(double*, double*, const double*, const double*, int64_t, int64_t, float);
template void rmsnorm_backward<float>(float*, float*, const float*, const float*, const float*, const float*, int64_t,
                                      int64_t);
template void rmsnorm_backward<double>(double*, double*, const double*, const double*, const double*, const double*,
                                       int64_t, int64_t);

}  // namespace tera::cpu
