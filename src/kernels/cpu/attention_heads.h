// The row layout of a qkv activation [B, T, (H + 2 KV) hs] that the CPU
// attention kernels share (attention.cpp, flash_attention.cpp): the H query
// heads, then the KV key heads, then the KV value heads; query head h reads
// key/value head g = h / (H / KV).
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>

namespace tera::cpu {

struct AttentionHeads {
  int64_t H, KV, hs;
  int64_t width() const { return (H + 2 * KV) * hs; }
  int64_t q(int64_t h) const { return h * hs; }
  int64_t k(int64_t g) const { return (H + g) * hs; }
  int64_t v(int64_t g) const { return (H + KV + g) * hs; }
  int64_t group() const { return H / KV; }
};

template <typename T>
T attention_scale(int64_t hs) {
  return static_cast<T>(1.0 / std::sqrt(static_cast<double>(hs)));
}

// Zeroes the q gradient of every head of group g and the k, v gradients of g,
// for all T rows of one sequence (dbase: its first row of dqkv).
template <typename T>
void zero_group_grads(T* dbase, const AttentionHeads& hd, int64_t g, int64_t T_) {
  for (int64_t t = 0; t < T_; ++t) {
    T* row = dbase + t * hd.width();
    for (int64_t h = g * hd.group(); h < (g + 1) * hd.group(); ++h) std::fill(row + hd.q(h), row + hd.q(h) + hd.hs, T(0));
    std::fill(row + hd.k(g), row + hd.k(g) + hd.hs, T(0));
    std::fill(row + hd.v(g), row + hd.v(g) + hd.hs, T(0));
  }
}

}  // namespace tera::cpu
