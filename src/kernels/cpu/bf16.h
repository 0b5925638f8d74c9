// bf16 values on the CPU: the upper 16 bits of the fp32 pattern, kept as
// uint16_t. Rounding is to nearest, ties to even; a NaN keeps its upper half
// with the quiet bit set. Without branches, so that loops over it vectorize.
#pragma once

#include <cstdint>
#include <cstring>
#include <type_traits>

namespace tera::cpu {

inline uint16_t to_bf16(float f) {
  uint32_t u;
  std::memcpy(&u, &f, sizeof u);
  const uint32_t rounded = (u + 0x7fffu + ((u >> 16) & 1u)) >> 16;
  const uint32_t nan = (u >> 16) | 0x40u;
  return static_cast<uint16_t>((u & 0x7fffffffu) > 0x7f800000u ? nan : rounded);
}

inline float from_bf16(uint16_t b) {
  const uint32_t u = static_cast<uint32_t>(b) << 16;
  float f;
  std::memcpy(&f, &u, sizeof f);
  return f;
}

// Element i of storage S (float, double, or bf16 as uint16_t) as arithmetic
// type T, and a T stored into S (bf16: rounded to nearest even): lets one
// elementwise loop serve fp32 / fp64 tensors and bf16 ones.
template <typename T, typename S>
inline T load_as(const S* p, int64_t i) {
  if constexpr (std::is_same_v<S, uint16_t>) {
    return static_cast<T>(from_bf16(p[i]));
  } else {
    return static_cast<T>(p[i]);
  }
}
template <typename S, typename T>
inline void store_as(S* p, int64_t i, T v) {
  if constexpr (std::is_same_v<S, uint16_t>) {
    p[i] = to_bf16(static_cast<float>(v));
  } else {
    p[i] = static_cast<S>(v);
  }
}

}  // namespace tera::cpu
