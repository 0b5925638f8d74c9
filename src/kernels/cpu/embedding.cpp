// Token + learned position embedding.
// Forward: out[b,t,:] = wte[tokens[b,t], :] + wpe[t, :].
// Backward: dwte[v,:] += sum over (b,t) with tokens[b,t] == v of dout[b,t,:];
// dwpe[t,:] += sum_b dout[b,t,:]. Threads split the channel dim, so a token
// that repeats is summed by one thread in (b,t) order: race-free, deterministic.
#include "kernels/cpu/cpu_ops.h"

namespace tera::cpu {

template <typename T>
void embedding_forward(T* out, const int32_t* tokens, const T* wte, const T* wpe, int64_t B, int64_t T_, int64_t C) {
#pragma omp parallel for collapse(2) schedule(static)
  for (int64_t b = 0; b < B; ++b) {
    for (int64_t t = 0; t < T_; ++t) {
      T* o = out + (b * T_ + t) * C;
      const T* e = wte + static_cast<int64_t>(tokens[b * T_ + t]) * C;
      const T* p = wpe + t * C;
#pragma omp simd
      for (int64_t c = 0; c < C; ++c) o[c] = e[c] + p[c];
    }
  }
}

template <typename T>
void embedding_backward(T* dwte, T* dwpe, const T* dout, const int32_t* tokens, int64_t B, int64_t T_, int64_t C) {
  constexpr int64_t kBlock = 64;
#pragma omp parallel for schedule(static)
  for (int64_t c0 = 0; c0 < C; c0 += kBlock) {
    const int64_t c1 = c0 + kBlock < C ? c0 + kBlock : C;
    for (int64_t i = 0; i < B * T_; ++i) {
      const T* d = dout + i * C;
      T* e = dwte + static_cast<int64_t>(tokens[i]) * C;
#pragma omp simd
      for (int64_t c = c0; c < c1; ++c) e[c] += d[c];
      if (dwpe != nullptr) {
        T* p = dwpe + (i % T_) * C;
#pragma omp simd
        for (int64_t c = c0; c < c1; ++c) p[c] += d[c];
      }
    }
  }
}

template void embedding_forward<float>(float*, const int32_t*, const float*, const float*, int64_t, int64_t,
                                       int64_t);
template void embedding_forward<double>(double*, const int32_t*, const double*, const double*, int64_t, int64_t,
                                        int64_t);
template void embedding_backward<float>(float*, float*, const float*, const int32_t*, int64_t, int64_t, int64_t);
template void embedding_backward<double>(double*, double*, const double*, const int32_t*, int64_t, int64_t,
                                         int64_t);

}  // namespace tera::cpu
