// A seeded pseudo-random permutation of [0, n) evaluated one index at a time
// in O(1) memory: a 4-round Feistel network over the smallest even number of
// bits covering n, keyed by Philox, with cycle-walking to stay below n (an
// index is re-enciphered until it lands in range; fewer than 4 rounds of
// walking on average, since the domain is under 4n).
#pragma once

#include <cstdint>

#include "core/rng.h"

namespace tera {

class IndexPermutation {
 public:
  IndexPermutation(uint64_t n, PhiloxKey key) : n_(n), key_(key) {
    int bits = 2;
    while (bits < 64 && (uint64_t{1} << bits) < n) bits += 2;
    half_ = bits / 2;
    mask_ = (uint64_t{1} << half_) - 1;
  }

  uint64_t operator()(uint64_t i) const {  // i < n
    if (n_ <= 1) return 0;
    uint64_t x = i;
    do {
      x = encipher(x);
    } while (x >= n_);
    return x;
  }

 private:
  uint64_t encipher(uint64_t x) const {
    uint64_t l = x >> half_, r = x & mask_;
    for (uint64_t round = 0; round < 4; ++round) {
      const uint64_t f = philox4x32(key_, r, round)[0] & mask_;
      const uint64_t next_r = l ^ f;
      l = r;
      r = next_r;
    }
    return (l << half_) | r;
  }

  uint64_t n_;
  PhiloxKey key_;
  int half_ = 1;
  uint64_t mask_ = 1;
};

}  // namespace tera
