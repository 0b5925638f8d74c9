// bf16 values on the CPU: the upper 16 bits of the fp32 pattern, kept as
// uint16_t; the scalar rounding (nearest, ties to even) and widening are
// core/bf16.h's.
#pragma once

#include <cstdint>
#include <cstring>
#include <type_traits>

#include "core/bf16.h"

namespace tera::cpu {

// core/bf16.h's: nearest-even rounding, exact widening.
inline uint16_t to_bf16(float f) { return bf16_nearest(f); }
inline float from_bf16(uint16_t b) { return bf16_widen(b); }

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
