// Rotary position embeddings (Su et al. 2021) on the q and k heads of a qkv
// buffer, in place, with Hugging Face Llama's rotate-half convention: a head
// vector x of hs = 2h elements splits into halves x1 = x[0, h), x2 = x[h, 2h);
// with angle a_i = pos * rope_inv_freq(rope, i, hs) for i in [0, h)
// (core/rope_params.h: theta^(-2i/hs), Llama 3.1's scaling when factor != 1):
//   out[i]     = x1[i] cos a_i - x2[i] sin a_i
//   out[h + i] = x2[i] cos a_i + x1[i] sin a_i
// The position of row n of a run of N = B*T flattened tokens is n mod T (each
// sequence counts from 0), or pos[n mod T] with a position table pos[T]
// (context parallelism: a rank's two chunks of each sequence). The map is a
// rotation, so its backward applies the inverse rotation (angle -a_i) to the
// gradients of q and k. Angles are computed in double; sin and cos are
// rounded once to the element type.
#include <cmath>
#include <vector>

#include "core/rope_params.h"
#include "kernels/cpu/cpu_ops.h"

namespace tera::cpu {

namespace {

template <typename T>
void rotate(T* qkv, int64_t N, int64_t T_, int64_t H, int64_t KV, int64_t hs, const RopeParams& rope, const int32_t* pos,
            double sign) {
  const int64_t half = hs / 2, width = (H + 2 * KV) * hs, heads = H + KV;  // q and k heads lead each row
#pragma omp parallel
  {
    std::vector<T> c(static_cast<size_t>(half)), s(static_cast<size_t>(half));
#pragma omp for schedule(static)
    for (int64_t n = 0; n < N; ++n) {
      const int64_t t = n % T_;
      const double p = static_cast<double>(pos != nullptr ? pos[t] : t);
      for (int64_t i = 0; i < half; ++i) {
        const double a = p * rope_inv_freq(rope, i, hs);
        c[static_cast<size_t>(i)] = static_cast<T>(std::cos(a));
        s[static_cast<size_t>(i)] = static_cast<T>(sign * std::sin(a));
      }
      T* row = qkv + n * width;
      for (int64_t h = 0; h < heads; ++h) {
        T* x = row + h * hs;
#pragma omp simd
        for (int64_t i = 0; i < half; ++i) {
          const T x1 = x[i], x2 = x[half + i];
          x[i] = x1 * c[static_cast<size_t>(i)] - x2 * s[static_cast<size_t>(i)];
          x[half + i] = x2 * c[static_cast<size_t>(i)] + x1 * s[static_cast<size_t>(i)];
        }
      }
    }
  }
}

}  // namespace

template <typename T>
void rope_forward(T* qkv, int64_t N, int64_t T_, int64_t H, int64_t KV, int64_t hs, RopeParams rope, const int32_t* pos) {
  rotate(qkv, N, T_, H, KV, hs, rope, pos, 1.0);
}

template <typename T>
void rope_backward(T* dqkv, int64_t N, int64_t T_, int64_t H, int64_t KV, int64_t hs, RopeParams rope, const int32_t* pos) {
  rotate(dqkv, N, T_, H, KV, hs, rope, pos, -1.0);
}

template void rope_forward<float>(float*, int64_t, int64_t, int64_t, int64_t, int64_t, RopeParams, const int32_t*);
template void rope_forward<double>(double*, int64_t, int64_t, int64_t, int64_t, int64_t, RopeParams, const int32_t*);
template void rope_backward<float>(float*, int64_t, int64_t, int64_t, int64_t, int64_t, RopeParams, const int32_t*);
template void rope_backward<double>(double*, int64_t, int64_t, int64_t, int64_t, int64_t, RopeParams, const int32_t*);

}  // namespace tera::cpu
