// Ring attention: causal attention of one context-parallel rank over the
// whole sequence, whose tokens are split over the cp ranks of its group by
// partition/context_split.h (Liu et al. 2023's ring; Megatron-Core's
// load-balanced chunks). Each rank keeps its own queries; the K/V blocks of
// the group pass around the ring (rank r sends to r + 1 and receives from
// r - 1), and at step s rank r runs the flash block kernels (kernels/ops.h
// FlashAttentionBlock*) on its queries against the block of rank r - s,
// merging the partial outputs with their log-sum-exp. The next block's
// transfer is posted before the current block's compute, so the two overlap
// where the communicator is asynchronous.
//
// Backward: the K/V blocks travel the same way, each with the gradient of
// its keys and values, which every rank adds its share to and passes on;
// after cp steps each block's gradient is back on its owner (one more hop).
//
// Shapes (one rank; T = seq_len / cp local tokens, N = B*T, Hl, KVl, hs as
// model/gpt_layers.h, Q = (Hl + 2 KVl) hs, W = 2 KVl hs):
//   qkv [N, Q] (rotated)  ->  out [N, Hl*hs], lse [B, Hl, T]
//   kv blocks [N, W] (k then v: the k,v columns of a rank's qkv)
// Every buffer is device memory from the workspace (ModelSpec::workspace's
// ring_* buffers).
#pragma once

#include <cstdint>

#include "kernels/backend.h"
#include "model/context_parallel.h"
#include "partition/context_split.h"

namespace tera {

// The workspace's ring buffers (device memory).
struct RingBuffers {
  float* kv = nullptr;            // [2, N, W]: the block in use and the one arriving
  float* dkv = nullptr;           // [2, N, W]: their gradients (backward)
  int32_t* positions = nullptr;   // [cp, T]: every cp rank's local positions
};

class RingAttention {
 public:
  // `cp` is this rank's context-parallel group and `split` its split
  // (split.rank == cp.rank()). Uploads the positions table.
  RingAttention(const Backend& be, ContextParallel& cp, const ContextSplit& split, int64_t Hl, int64_t KVl, int64_t hs,
                const RingBuffers& buffers);
  int64_t local_tokens() const { return split_.local(); }
  const ContextSplit& split() const { return split_; }
  // This rank's local positions [T] (device), for the rotary embedding.
  const int32_t* positions() const { return positions_of(split_.rank); }

  // out [N, Hl*hs], lse [B, Hl, T] of qkv [N, Q]; T must be local_tokens().
  void forward(float* out, float* lse, const float* qkv, int64_t B, int64_t T);
  // dqkv [N, Q] (overwritten) from dout [N, Hl*hs] and the forward's qkv, out, lse.
  void backward(float* dqkv, const float* dout, const float* qkv, const float* out, const float* lse, int64_t B,
                int64_t T);

 private:
  const int32_t* positions_of(int r) const { return buffers_.positions + static_cast<int64_t>(r) * split_.local(); }
  float* kv(int i, int64_t n) const { return buffers_.kv + (i % 2) * n; }
  float* dkv(int i, int64_t n) const { return buffers_.dkv + (i % 2) * n; }
  // The block rank r meets at ring step s: its own first, then its left neighbour's.
  int source(int s) const { return (cp_.rank() - s + cp_.size()) % cp_.size(); }

  const Backend& be_;
  ContextParallel& cp_;
  ContextSplit split_;
  int64_t Hl_, KVl_, hs_;
  RingBuffers buffers_;
};

}  // namespace tera
