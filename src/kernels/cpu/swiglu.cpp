// SwiGLU (Shazeer 2020; Llama's MLP): out = silu(gate) * up, silu(z) = z / (1 + exp(-z)).
// Backward: dup = dout * silu(gate); dgate = dout * up * silu'(gate) with
//   silu'(z) = s (1 + z (1 - s)),  s = 1 / (1 + exp(-z)).
// The _bf16 forms read gate and up (and write out) in bf16 and compute in fp32.
#include "kernels/cpu/bf16.h"
#include "kernels/cpu/cpu_ops.h"
#include "kernels/cpu/vec_math.h"

namespace tera::cpu {

namespace {
// T is the arithmetic; S the storage of gate and up (T, or bf16), O of out.
template <typename T, typename O, typename S>
void swiglu_forward_impl(O* out, const S* gate, const S* up, int64_t n) {
#pragma omp parallel for simd schedule(static)
  for (int64_t i = 0; i < n; ++i) {
    const T z = load_as<T>(gate, i);
    const T s = T(1) / (T(1) + exp_v<T>(-z));
    store_as(out, i, z * s * load_as<T>(up, i));
  }
}

template <typename T, typename S>
void swiglu_backward_impl(T* dgate, T* dup, const S* gate, const S* up, const T* dout, int64_t n) {
#pragma omp parallel for simd schedule(static)
  for (int64_t i = 0; i < n; ++i) {
    const T z = load_as<T>(gate, i);
    const T s = T(1) / (T(1) + exp_v<T>(-z));
    const T d = dout[i];
    dup[i] = d * z * s;
    dgate[i] = d * load_as<T>(up, i) * s * (T(1) + z * (T(1) - s));
  }
}
}  // namespace

template <typename T>
void swiglu_forward(T* out, const T* gate, const T* up, int64_t n) {
  swiglu_forward_impl<T>(out, gate, up, n);
}
template <typename T>
void swiglu_backward(T* dgate, T* dup, const T* gate, const T* up, const T* dout, int64_t n) {
  swiglu_backward_impl<T>(dgate, dup, gate, up, dout, n);
}
void swiglu_forward_bf16(uint16_t* out, const uint16_t* gate, const uint16_t* up, int64_t n) {
  swiglu_forward_impl<float>(out, gate, up, n);
}
void swiglu_backward_bf16(float* dgate, float* dup, const uint16_t* gate, const uint16_t* up, const float* dout,
                          int64_t n) {
  swiglu_backward_impl<float>(dgate, dup, gate, up, dout, n);
}

template void swiglu_forward<float>(float*, const float*, const float*, int64_t);
template void swiglu_forward<double>(double*, const double*, const double*, int64_t);
template void swiglu_backward<float>(float*, float*, const float*, const float*, const float*, int64_t);
template void swiglu_backward<double>(double*, double*, const double*, const double*, const double*, int64_t);

}  // namespace tera::cpu
