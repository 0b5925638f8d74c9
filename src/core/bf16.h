// bf16 scalars: the upper 16 bits of the fp32 pattern, kept as uint16_t.
// Rounding is to nearest, ties to even; a NaN keeps its upper half with the
// quiet bit set. Widening is exact. Without branches, so that loops over it
// vectorize. (kernels/cpu/bf16.h builds its element access on these;
// ckpt/ writes bf16 safetensors with them.)
#pragma once

#include <cstdint>
#include <cstring>

namespace tera {

inline uint16_t bf16_nearest(float f) {
  uint32_t u;
  std::memcpy(&u, &f, sizeof u);
  const uint32_t rounded = (u + 0x7fffu + ((u >> 16) & 1u)) >> 16;
  const uint32_t nan = (u >> 16) | 0x40u;
  return static_cast<uint16_t>((u & 0x7fffffffu) > 0x7f800000u ? nan : rounded);
}

inline float bf16_widen(uint16_t b) {
  const uint32_t u = static_cast<uint32_t>(b) << 16;
  float f;
  std::memcpy(&f, &u, sizeof f);
  return f;
}

}  // namespace tera
