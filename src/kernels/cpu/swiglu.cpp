// SwiGLU (Shazeer 2020; Llama's MLP): out = silu(gate) * up, silu(z) = z / (1 + exp(-z)).
// Backward: dup = dout * silu(gate); dgate = dout * up * silu'(gate) with
//   silu'(z) = s (1 + z (1 - s)),  s = 1 / (1 + exp(-z)).
#include "kernels/cpu/cpu_ops.h"
#include "kernels/cpu/vec_math.h"

namespace tera::cpu {

template <typename T>
void swiglu_forward(T* out, const T* gate, const T* up, int64_t n) {
#pragma omp parallel for simd schedule(static)
  for (int64_t i = 0; i < n; ++i) {
    const T z = gate[i];
    const T s = T(1) / (T(1) + exp_v<T>(-z));
    out[i] = z * s * up[i];
  }
}

template <typename T>
void swiglu_backward(T* dgate, T* dup, const T* gate, const T* up, const T* dout, int64_t n) {
#pragma omp parallel for simd schedule(static)
  for (int64_t i = 0; i < n; ++i) {
    const T z = gate[i];
    const T s = T(1) / (T(1) + exp_v<T>(-z));
    const T d = dout[i];
    dup[i] = d * z * s;
    dgate[i] = d * up[i] * s * (T(1) + z * (T(1) - s));
  }
}

template void swiglu_forward<float>(float*, const float*, const float*, int64_t);
template void swiglu_forward<double>(double*, const double*, const double*, int64_t);
template void swiglu_backward<float>(float*, float*, const float*, const float*, const float*, int64_t);
template void swiglu_backward<double>(double*, double*, const double*, const double*, const double*, int64_t);

}  // namespace tera::cpu
