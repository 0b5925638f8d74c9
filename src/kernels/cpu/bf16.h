// bf16 values on the CPU: the upper 16 bits of the fp32 pattern, kept as
// uint16_t. Rounding is to nearest, ties to even; a NaN keeps its upper half
// with the quiet bit set. Without branches, so that loops over it vectorize.
#pragma once

#include <cstdint>
#include <cstring>

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

}  // namespace tera::cpu
