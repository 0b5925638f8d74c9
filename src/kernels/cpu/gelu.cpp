// GELU, tanh approximation (GPT-2's "gelu_new"; torch's approximate="tanh"):
//   y = 0.5 x (1 + tanh(u)),  u = k (x + 0.044715 x^3),  k = sqrt(2/pi)
//   dy/dx = 0.5 (1 + tanh u) + 0.5 x (1 - tanh^2 u) k (1 + 3 * 0.044715 x^2)
// The _bf16 forms read x (and write out) in bf16 and compute in fp32.
#include "kernels/cpu/bf16.h"
#include "kernels/cpu/cpu_ops.h"
#include "kernels/cpu/vec_math.h"

namespace tera::cpu {

namespace {
constexpr double kSqrt2OverPi = 0.7978845608028654;
constexpr double kCubic = 0.044715;

// T is the arithmetic; X and Y the storage of x and out (T, or bf16).
template <typename T, typename Y, typename X>
void gelu_forward_impl(Y* out, const X* x, int64_t n) {
  const T k = static_cast<T>(kSqrt2OverPi), a = static_cast<T>(kCubic);
#pragma omp parallel for simd schedule(static)
  for (int64_t i = 0; i < n; ++i) {
    const T xi = load_as<T>(x, i);
    const T u = k * (xi + a * xi * xi * xi);
    store_as(out, i, T(0.5) * xi * (T(1) + tanh_v<T>(u)));
  }
}

template <typename T, typename X>
void gelu_backward_impl(T* dx, const X* x, const T* dout, int64_t n) {
  const T k = static_cast<T>(kSqrt2OverPi), a = static_cast<T>(kCubic);
#pragma omp parallel for simd schedule(static)
  for (int64_t i = 0; i < n; ++i) {
    const T xi = load_as<T>(x, i);
    const T u = k * (xi + a * xi * xi * xi);
    const T t = tanh_v<T>(u);
    const T dudx = k * (T(1) + T(3) * a * xi * xi);
    dx[i] = dout[i] * (T(0.5) * (T(1) + t) + T(0.5) * xi * (T(1) - t * t) * dudx);
  }
}

}  // namespace

template <typename T>
void gelu_forward(T* out, const T* x, int64_t n) {
  gelu_forward_impl<T>(out, x, n);
}
template <typename T>
void gelu_backward(T* dx, const T* x, const T* dout, int64_t n) {
  gelu_backward_impl<T>(dx, x, dout, n);
}
void gelu_forward_bf16(uint16_t* out, const uint16_t* x, int64_t n) { gelu_forward_impl<float>(out, x, n); }
void gelu_backward_bf16(float* dx, const uint16_t* x, const float* dout, int64_t n) {
  gelu_backward_impl<float>(dx, x, dout, n);
}

template void gelu_forward<float>(float*, const float*, int64_t);
template void gelu_forward<double>(double*, const double*, int64_t);
template void gelu_backward<float>(float*, const float*, const float*, int64_t);
template void gelu_backward<double>(double*, const double*, const double*, int64_t);

}  // namespace tera::cpu
