// Token embedding (vocab-parallel) and learned positions, on a run of N
// flattened tokens [B*T] (or a sequence-parallel shard of it).
// Lookup: out[n,:] = wte_local[tok - v0, :] for tokens this rank holds, else 0.
// Backward: dwte_local[tok - v0, :] += dout[n, :]. Threads split the channel
// dim, so a token that repeats is summed by one thread in token order:
// race-free and deterministic. Positions: token i is at (n0 + i) mod T.
#include "kernels/cpu/cpu_ops.h"

namespace tera::cpu {

template <typename T>
void embedding_lookup(T* out, const int32_t* tokens, const T* wte_local, int64_t v0, int64_t v1, int64_t N, int64_t C) {
#pragma omp parallel for schedule(static)
  for (int64_t n = 0; n < N; ++n) {
    T* o = out + n * C;
    const int64_t tok = tokens[n];
    if (tok >= v0 && tok < v1) {
      const T* e = wte_local + (tok - v0) * C;
#pragma omp simd
      for (int64_t c = 0; c < C; ++c) o[c] = e[c];
    } else {
      for (int64_t c = 0; c < C; ++c) o[c] = T(0);
    }
  }
}

template <typename T>
void embedding_lookup_backward(T* dwte_local, const T* dout, const int32_t* tokens, int64_t v0, int64_t v1, int64_t N,
                               int64_t C) {
  constexpr int64_t kBlock = 64;
#pragma omp parallel for schedule(static)
  for (int64_t c0 = 0; c0 < C; c0 += kBlock) {
    const int64_t c1 = c0 + kBlock < C ? c0 + kBlock : C;
    for (int64_t n = 0; n < N; ++n) {
      const int64_t tok = tokens[n];
      if (tok < v0 || tok >= v1) continue;
      const T* d = dout + n * C;
      T* e = dwte_local + (tok - v0) * C;
#pragma omp simd
      for (int64_t c = c0; c < c1; ++c) e[c] += d[c];
    }
  }
}

template <typename T>
void position_add(T* out, const T* wpe, int64_t n0, int64_t N, int64_t T_, int64_t C) {
#pragma omp parallel for schedule(static)
  for (int64_t i = 0; i < N; ++i) {
    T* o = out + i * C;
    const T* p = wpe + ((n0 + i) % T_) * C;
#pragma omp simd
    for (int64_t c = 0; c < C; ++c) o[c] += p[c];
  }
}

template <typename T>
void position_add_backward(T* dwpe, const T* dout, int64_t n0, int64_t N, int64_t T_, int64_t C) {
  // Parallel over positions: each thread owns whole rows of dwpe.
#pragma omp parallel for schedule(static)
  for (int64_t pos = 0; pos < T_; ++pos) {
    T* p = dwpe + pos * C;
    const int64_t first = ((pos - n0) % T_ + T_) % T_;  // first i with (n0 + i) % T == pos
    for (int64_t i = first; i < N; i += T_) {
      const T* d = dout + i * C;
#pragma omp simd
      for (int64_t c = 0; c < C; ++c) p[c] += d[c];
    }
  }
}

template void embedding_lookup<float>(float*, const int32_t*, const float*, int64_t, int64_t, int64_t, int64_t);
template void embedding_lookup<double>(double*, const int32_t*, const double*, int64_t, int64_t, int64_t, int64_t);
template void embedding_lookup_backward<float>(float*, const float*, const int32_t*, int64_t, int64_t, int64_t, int64_t);
template void embedding_lookup_backward<double>(double*, const double*, const int32_t*, int64_t, int64_t, int64_t,
                                                int64_t);
template void position_add<float>(float*, const float*, int64_t, int64_t, int64_t, int64_t);
template void position_add<double>(double*, const double*, int64_t, int64_t, int64_t, int64_t);
template void position_add_backward<float>(float*, const float*, int64_t, int64_t, int64_t, int64_t);
template void position_add_backward<double>(double*, const double*, int64_t, int64_t, int64_t, int64_t);

}  // namespace tera::cpu
