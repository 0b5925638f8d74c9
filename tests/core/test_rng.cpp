// Philox4x32-10 against the known-answer vectors Random123 publishes
// (tests/kat_vectors, lines "philox4x32 10 ..."): counter words c0..c3, key
// words k0, k1, expected output words. tera's block function takes the
// counter as two 64-bit halves: ctr_lo = c1:c0, ctr_hi = c3:c2.
#include <gtest/gtest.h>

#include <array>
#include <cstdint>

#include "core/rng.h"

namespace tera {
namespace {

struct Kat {
  std::array<uint32_t, 4> ctr;
  std::array<uint32_t, 2> key;
  std::array<uint32_t, 4> expected;
};

std::array<uint32_t, 4> block(const Kat& k) {
  const uint64_t lo = (static_cast<uint64_t>(k.ctr[1]) << 32) | k.ctr[0];
  const uint64_t hi = (static_cast<uint64_t>(k.ctr[3]) << 32) | k.ctr[2];
  return philox4x32(PhiloxKey{k.key[0], k.key[1]}, lo, hi);
}

TEST(Philox, Random123KnownAnswerZeros) {
  const Kat k{{0, 0, 0, 0}, {0, 0}, {0x6627e8d5u, 0xe169c58du, 0xbc57ac4cu, 0x9b00dbd8u}};
  EXPECT_EQ(block(k), k.expected);
}

TEST(Philox, Random123KnownAnswerOnes) {
  const Kat k{{0xffffffffu, 0xffffffffu, 0xffffffffu, 0xffffffffu},
              {0xffffffffu, 0xffffffffu},
              {0x408f276du, 0x41c83b0eu, 0xa20bc7c6u, 0x6d5451fdu}};
  EXPECT_EQ(block(k), k.expected);
}

TEST(Philox, Random123KnownAnswerPiDigits) {
  const Kat k{{0x243f6a88u, 0x85a308d3u, 0x13198a2eu, 0x03707344u},
              {0xa4093822u, 0x299f31d0u},
              {0xd16cfe09u, 0x94fdccebu, 0x5001e420u, 0x24126ea1u}};
  EXPECT_EQ(block(k), k.expected);
}

// The default ctr_hi is zero: the one-argument form is the same block.
TEST(Philox, DefaultHighCounterIsZero) {
  const PhiloxKey key{0xa4093822u, 0x299f31d0u};
  EXPECT_EQ(philox4x32(key, 0x85a308d3243f6a88ull), philox4x32(key, 0x85a308d3243f6a88ull, 0));
}

// FNV-1a 64 reference values (the offset basis for "", and "a" from the
// published FNV test suite): it keys every parameter stream.
TEST(Philox, Fnv1a64ReferenceValues) {
  static_assert(fnv1a64("") == 0xcbf29ce484222325ull);
  static_assert(fnv1a64("a") == 0xaf63dc4c8601ec8cull);
  EXPECT_EQ(fnv1a64("foobar"), 0x85944171f73967e8ull);
}

TEST(Philox, UnitFloatNeverZeroAndAtMostOne) {
  EXPECT_GT(u32_to_unit_float(0), 0.0f);
  EXPECT_EQ(u32_to_unit_float(0xffffffffu), 1.0f);
}

TEST(Philox, BelowStaysInRange) {
  const PhiloxKey key = philox_key(7, "below");
  for (uint64_t i = 0; i < 1000; ++i) EXPECT_LT(philox_below(key, i, 3), 3u);
}

}  // namespace
}  // namespace tera
