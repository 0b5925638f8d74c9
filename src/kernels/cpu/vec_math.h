// Elementwise math that the compiler can vectorize inside `#pragma omp simd`
// loops without -ffast-math (which would also break isnan checks). For double
// the standard library is used: the fp64 instantiations are the reference.
// exp_approx<float>: Cody-Waite range reduction + degree-6 minimax polynomial,
// max relative error about 2 ulp on [-87, 88] (tests/kernels/test_vec_math).
#pragma once

#include <cmath>
#include <cstdint>
#include <bit>

namespace tera::cpu {


inline float exp_approx_f32(float x) {
  // Clamp so that 2^n stays a normal float; exp(-87.3) ~ 1.2e-38.
  x = x < -87.33654f ? -87.33654f : (x > 88.3762626f ? 88.3762626f : x);
  // Round to nearest by the 1.5 * 2^23 trick (vectorizes where roundf may not).
  const float n = (x * 1.44269504088896341f + 12582912.0f) - 12582912.0f;
  // r = x - n*ln2 with ln2 split into a high part exact in float and a low part.
  float r = x - n * 0.693359375f;
  r = r - n * -2.12194440e-4f;
  // exp(r) on |r| <= ln2/2: Taylor/minimax coefficients (Cephes expf).
  float p = 1.9875691500E-4f;
  p = p * r + 1.3981999507E-3f;
  p = p * r + 8.3334519073E-3f;
  p = p * r + 4.1665795894E-2f;
  p = p * r + 1.6666665459E-1f;
  p = p * r + 5.0000001201E-1f;
  p = p * r * r + r + 1.0f;
  const int32_t ni = static_cast<int32_t>(n);
  // Scale by 2^n, split in two steps so n = 128 (x near the top clamp) stays finite.
  const int32_t n1 = ni >> 1, n2 = ni - n1;
  const float s1 = std::bit_cast<float>(static_cast<uint32_t>(n1 + 127) << 23);
  const float s2 = std::bit_cast<float>(static_cast<uint32_t>(n2 + 127) << 23);
  return p * s1 * s2;
}

template <typename T>
inline T exp_v(T x) {
  if constexpr (sizeof(T) == 4) {
    return exp_approx_f32(x);
  } else {
    return std::exp(x);
  }
}

// tanh through exp: tanh(u) = 1 - 2 / (exp(2u) + 1). Absolute error ~1e-7 in
// float (relative error grows only where tanh(u) ~ 0, where GELU adds 1 to it).
template <typename T>
inline T tanh_v(T u) {
  if constexpr (sizeof(T) == 4) {
    return 1.0f - 2.0f / (exp_approx_f32(2.0f * u) + 1.0f);
  } else {
    return std::tanh(u);
  }
}

}  // namespace tera::cpu
