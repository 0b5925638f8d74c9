// Counter-based random numbers (Philox4x32-10, Salmon et al. SC'11). A value
// depends only on (key, counter), never on call order, so a parameter element
// gets the same initial value under every sharding: the key comes from
// (seed, parameter name) and the counter is the element's global index
// (DESIGN.md invariant 1). Data order uses the same generator keyed by a stream.
#pragma once

#include <array>
#include <cmath>
#include <cstdint>
#include <string_view>

namespace tera {

struct PhiloxKey {
  uint32_t k0 = 0, k1 = 0;
};

// One Philox4x32-10 block: 4 independent 32-bit outputs for counter (c0..c3).
inline std::array<uint32_t, 4> philox4x32(PhiloxKey key, uint64_t ctr_lo, uint64_t ctr_hi = 0) {
  constexpr uint32_t kM0 = 0xD2511F53u, kM1 = 0xCD9E8D57u;
  constexpr uint32_t kW0 = 0x9E3779B9u, kW1 = 0xBB67AE85u;
  uint32_t c0 = static_cast<uint32_t>(ctr_lo), c1 = static_cast<uint32_t>(ctr_lo >> 32);
  uint32_t c2 = static_cast<uint32_t>(ctr_hi), c3 = static_cast<uint32_t>(ctr_hi >> 32);
  uint32_t k0 = key.k0, k1 = key.k1;
  for (int round = 0; round < 10; ++round) {
    const uint64_t p0 = static_cast<uint64_t>(kM0) * c0;
    const uint64_t p1 = static_cast<uint64_t>(kM1) * c2;
    const uint32_t hi0 = static_cast<uint32_t>(p0 >> 32), lo0 = static_cast<uint32_t>(p0);
    const uint32_t hi1 = static_cast<uint32_t>(p1 >> 32), lo1 = static_cast<uint32_t>(p1);
    c0 = hi1 ^ c1 ^ k0;
    c1 = lo1;
    c2 = hi0 ^ c3 ^ k1;
    c3 = lo0;
    k0 += kW0;
    k1 += kW1;
  }
  return {c0, c1, c2, c3};
}

// 64-bit FNV-1a; stable across platforms and releases (it keys saved runs).
constexpr uint64_t fnv1a64(std::string_view s) {
  uint64_t h = 0xcbf29ce484222325ull;
  for (char ch : s) {
    h ^= static_cast<uint8_t>(ch);
    h *= 0x100000001b3ull;
  }
  return h;
}

// Key for stream `name` under a user seed: distinct names give independent streams.
inline PhiloxKey philox_key(uint64_t seed, std::string_view name) {
  const uint64_t h = fnv1a64(name) ^ (seed * 0x9E3779B97F4A7C15ull);
  return PhiloxKey{static_cast<uint32_t>(h), static_cast<uint32_t>(h >> 32)};
}

// Uniform in (0, 1]: 24 random bits, never 0 (safe for log).
inline float u32_to_unit_float(uint32_t x) { return (static_cast<float>(x >> 8) + 1.0f) * (1.0f / 16777216.0f); }

// Standard normal for element `index` of stream `key` (Box-Muller on one block,
// computed in double so the value is the same on every backend and compiler).
inline float philox_normal(PhiloxKey key, uint64_t index) {
  const auto r = philox4x32(key, index);
  const double u1 = (static_cast<double>(r[0]) + 1.0) / 4294967296.0;  // (0, 1]
  const double u2 = static_cast<double>(r[1]) / 4294967296.0;          // [0, 1)
  return static_cast<float>(std::sqrt(-2.0 * std::log(u1)) * std::cos(6.283185307179586 * u2));
}

// Uniform 64-bit integer for element `index` of stream `key`.
inline uint64_t philox_u64(PhiloxKey key, uint64_t index) {
  const auto r = philox4x32(key, index);
  return (static_cast<uint64_t>(r[1]) << 32) | r[0];
}

// Uniform integer in [0, n) without modulo bias worth noting (n << 2^64).
inline uint64_t philox_below(PhiloxKey key, uint64_t index, uint64_t n) {
  return static_cast<uint64_t>((static_cast<unsigned __int128>(philox_u64(key, index)) * n) >> 64);
}

}  // namespace tera
