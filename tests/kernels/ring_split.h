// Context parallelism's load-balanced causal split, for the ring attention
// cases of test_conformance.cpp: a sequence of T tokens is cut into 2 cp
// chunks of Tc = T / (2 cp); rank r holds chunks r and 2cp - 1 - r (local
// tokens [0, Tc) and [Tc, 2Tc)), so every rank does the same causal work.
// A rank's K/V block is the k,v part of its local qkv rows. The fp64 ring
// here (cpu kernels on host vectors) is what the backend's ring is held to
// besides the full-sequence reference.
#pragma once

#include <cstdint>
#include <vector>

#include "kernels/cpu/cpu_ops.h"

namespace tera::testing {

struct RingSplit {
  int64_t cp, Tc;
  int64_t local() const { return 2 * Tc; }
  // The global position of rank r's local token i.
  int64_t position(int64_t r, int64_t i) const { return i < Tc ? r * Tc + i : (2 * cp - 1 - r) * Tc + (i - Tc); }
  std::vector<int32_t> positions(int64_t r) const {
    std::vector<int32_t> p(static_cast<size_t>(local()));
    for (int64_t i = 0; i < local(); ++i) p[static_cast<size_t>(i)] = static_cast<int32_t>(position(r, i));
    return p;
  }
  // The block rank r meets at step i of the ring: its own first, then the
  // one its left neighbour passed on.
  int64_t source(int64_t r, int64_t i) const { return (r - i + cp) % cp; }
};

// Rank r's rows [B, 2Tc, n] of columns [c0, c0 + n) of x[B, T, ld]
// (rows = T per sequence; out of x in [B, rows, ld] form).
template <typename V>
std::vector<double> ring_gather(const V& x, const RingSplit& sp, int64_t r, int64_t B, int64_t T, int64_t ld,
                                int64_t c0, int64_t n) {
  std::vector<double> out(static_cast<size_t>(B * sp.local() * n));
  for (int64_t b = 0; b < B; ++b) {
    for (int64_t i = 0; i < sp.local(); ++i) {
      for (int64_t c = 0; c < n; ++c) {
        out[static_cast<size_t>((b * sp.local() + i) * n + c)] =
            static_cast<double>(x[static_cast<size_t>((b * T + sp.position(r, i)) * ld + c0 + c)]);
      }
    }
  }
  return out;
}

// The reverse: rank r's rows [B, 2Tc, n] into columns [c0, c0 + n) of x[B, T, ld].
template <typename V>
void ring_scatter(std::vector<double>& x, const V& part, const RingSplit& sp, int64_t r, int64_t B, int64_t T,
                  int64_t ld, int64_t c0, int64_t n) {
  for (int64_t b = 0; b < B; ++b) {
    for (int64_t i = 0; i < sp.local(); ++i) {
      for (int64_t c = 0; c < n; ++c) {
        x[static_cast<size_t>((b * T + sp.position(r, i)) * ld + c0 + c)] =
            static_cast<double>(part[static_cast<size_t>((b * sp.local() + i) * n + c)]);
      }
    }
  }
}

// lse[B, H, T] from rank r's [B, H, 2Tc].
template <typename V>
void ring_scatter_lse(std::vector<double>& lse, const V& part, const RingSplit& sp, int64_t r, int64_t B, int64_t H,
                      int64_t T) {
  for (int64_t bh = 0; bh < B * H; ++bh) {
    for (int64_t i = 0; i < sp.local(); ++i) {
      lse[static_cast<size_t>(bh * T + sp.position(r, i))] = static_cast<double>(part[static_cast<size_t>(bh * sp.local() + i)]);
    }
  }
}

// Columns [c0, c0 + n) of x[rows, ld], as [rows, n].
template <typename V>
std::vector<double> ring_columns(const V& x, int64_t rows, int64_t ld, int64_t c0, int64_t n) {
  std::vector<double> out(static_cast<size_t>(rows * n));
  for (int64_t i = 0; i < rows; ++i) {
    for (int64_t c = 0; c < n; ++c) out[static_cast<size_t>(i * n + c)] = static_cast<double>(x[static_cast<size_t>(i * ld + c0 + c)]);
  }
  return out;
}

struct RingShape {
  int64_t B, T, H, KV, hs;
  int64_t width() const { return (H + 2 * KV) * hs; }
};

// The whole ring in fp64 on the cpu kernels: the global out[B,T,H*hs],
// lse[B,H,T] and dqkv[B,T,W] of causal attention over qkv[B,T,W] with
// output gradient dout[B,T,H*hs], put back together from the ranks.
struct RingResult {
  std::vector<double> out, lse, dqkv;
};
inline RingResult ring_attention_fp64(const std::vector<double>& qkv, const std::vector<double>& dout,
                                      const RingShape& s, int64_t cp) {
  const RingSplit sp{cp, s.T / (2 * cp)};
  const int64_t W = s.width(), C = s.H * s.hs, Wk = 2 * s.KV * s.hs, L = sp.local();
  std::vector<std::vector<double>> q(cp), kv(cp), dy(cp), out(cp), lse(cp), dq(cp), dkv(cp);
  std::vector<std::vector<int32_t>> pos(cp);
  for (int64_t r = 0; r < cp; ++r) {
    q[r] = ring_gather(qkv, sp, r, s.B, s.T, W, 0, W);
    kv[r] = ring_gather(qkv, sp, r, s.B, s.T, W, C, Wk);
    dy[r] = ring_gather(dout, sp, r, s.B, s.T, C, 0, C);
    pos[r] = sp.positions(r);
    out[r].assign(static_cast<size_t>(s.B * L * C), 0.0);
    lse[r].assign(static_cast<size_t>(s.B * s.H * L), 0.0);
    dq[r].assign(q[r].size(), 0.0);
    dkv[r].assign(kv[r].size(), 0.0);
  }
  for (int64_t r = 0; r < cp; ++r) {
    for (int64_t i = 0; i < cp; ++i) {
      const int64_t o = sp.source(r, i);
      cpu::flash_attention_block_forward<double>(out[r].data(), lse[r].data(), q[r].data(), kv[o].data(),
                                                 pos[r].data(), pos[o].data(), s.B, L, L, s.H, s.KV, s.hs, i > 0);
    }
  }
  for (int64_t r = 0; r < cp; ++r) {
    for (int64_t i = 0; i < cp; ++i) {
      const int64_t o = sp.source(r, i);
      cpu::flash_attention_block_backward<double>(dq[r].data(), dkv[o].data(), dy[r].data(), q[r].data(),
                                                  kv[o].data(), out[r].data(), lse[r].data(), pos[r].data(),
                                                  pos[o].data(), s.B, L, L, s.H, s.KV, s.hs);
    }
  }
  RingResult res{std::vector<double>(static_cast<size_t>(s.B * s.T * C)),
                 std::vector<double>(static_cast<size_t>(s.B * s.H * s.T)), std::vector<double>(qkv.size())};
  for (int64_t r = 0; r < cp; ++r) {
    ring_scatter(res.out, out[r], sp, r, s.B, s.T, C, 0, C);
    ring_scatter_lse(res.lse, lse[r], sp, r, s.B, s.H, s.T);
    ring_scatter(res.dqkv, ring_columns(dq[r], s.B * L, W, 0, C), sp, r, s.B, s.T, W, 0, C);
    ring_scatter(res.dqkv, dkv[r], sp, r, s.B, s.T, W, C, Wk);
  }
  return res;
}

}  // namespace tera::testing
