// The row layout of a qkv activation [B, T, (H + 2 KV) hs] that the CPU
// attention kernels share (attention.cpp, flash_attention.cpp): the H query
// heads, then the KV key heads, then the KV value heads; query head h reads
// key/value head g = h / (H / KV).
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>

#include "kernels/cpu/vec_math.h"

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

// The scalar kernels' row pieces (attention.cpp's reference kernels and
// the ring block kernels' scalar template, flash_attention_block.cpp).
template <typename T>
T dot(const T* a, const T* b, int64_t n) {
  T s = 0;
#pragma omp simd reduction(+ : s)
  for (int64_t i = 0; i < n; ++i) s += a[i] * b[i];
  return s;
}

// One (query, key) pair of the flash backward, from the row's final lse and
// D = dy . y: P = exp(scale q.k - lse), dS = P (dy.v - D) scale;
// dq += dS k, dk += dS q, dv += P dy (each [hs]).
template <typename T>
void flash_pair_backward(T* dq, T* dk, T* dv, const T* q, const T* k, const T* v, const T* dy, T D, T lse, T scale,
                         int64_t hs) {
  const T p = exp_v<T>(dot(q, k, hs) * scale - lse);
  const T ds = p * (dot(dy, v, hs) - D) * scale;
#pragma omp simd
  for (int64_t i = 0; i < hs; ++i) {
    dq[i] += ds * k[i];
    dk[i] += ds * q[i];
    dv[i] += p * dy[i];
  }
}

}  // namespace tera::cpu
