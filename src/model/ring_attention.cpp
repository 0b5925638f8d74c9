// The ring of flash block kernels; see ring_attention.h.
#include "model/ring_attention.h"

#include <cstdlib>

#include "core/check.h"

namespace tera {

RingAttention::RingAttention(const Backend& be, ContextParallel& cp, const ContextSplit& split, int64_t Hl, int64_t KVl,
                             int64_t hs, const RingBuffers& buffers)
    : be_(be), cp_(cp), split_(split), Hl_(Hl), KVl_(KVl), hs_(hs), buffers_(buffers) {
  TERA_ASSERT(cp.size() == split.cp && cp.rank() == split.rank, "the ring's group is the context split's");
  TERA_ASSERT(buffers_.kv != nullptr && buffers_.dkv != nullptr && buffers_.positions != nullptr,
              "the workspace plan lacks the ring attention's buffers");
  // Every rank's positions, in rank order (a block's keys are at its owner's).
  std::vector<int32_t> all;
  for (int r = 0; r < split.cp; ++r) {
    const std::vector<int32_t> p = ContextSplit{split.cp, r, split.seq_len}.positions();
    all.insert(all.end(), p.begin(), p.end());
  }
  be_.copy(buffers_.positions, all.data(), static_cast<int64_t>(all.size() * sizeof(int32_t)), CopyKind::host_to_device);
}

void RingAttention::forward(float* out, float* lse, const float* qkv, int64_t B, int64_t T) {
  TERA_ASSERT(T == split_.local(), "ring attention runs the rank's whole local sequence");
  const int64_t N = B * T, Q = (Hl_ + 2 * KVl_) * hs_, W = 2 * KVl_ * hs_, n = N * W;
  const int steps = cp_.size();
  be_.copy_columns(kv(0, n), W, qkv + Hl_ * hs_, Q, N, W);
  for (int s = 0; s < steps; ++s) {
    // The next block's shift overlaps this block's compute.
    if (s + 1 < steps) cp_.start_shift(ContextParallel::blocks, kv(s, n), kv(s + 1, n), n);
    be_.flash_attention_block_forward(out, lse, qkv, kv(s, n), positions(), positions_of(source(s)), B, T, T, Hl_,
                                      KVl_, hs_, /*accumulate=*/s > 0);
    cp_.finish_shift(ContextParallel::blocks);
  }
}

void RingAttention::backward(float* dqkv, const float* dout, const float* qkv, const float* out, const float* lse,
                             int64_t B, int64_t T) {
  TERA_ASSERT(T == split_.local(), "ring attention runs the rank's whole local sequence");
  const int64_t N = B * T, Q = (Hl_ + 2 * KVl_) * hs_, W = 2 * KVl_ * hs_, n = N * W;
  const int steps = cp_.size();
  be_.fill(dqkv, DType::f32, 0.0, N * Q);  // the blocks add into the q columns
  be_.copy_columns(kv(0, n), W, qkv + Hl_ * hs_, Q, N, W);
  be_.fill(dkv(0, n), DType::f32, 0.0, n);
  for (int s = 0; s < steps; ++s) {
    // At step s this rank holds block source(s) and the gradient every rank
    // before it on the ring added to that block.
    if (s + 1 < steps) cp_.start_shift(ContextParallel::blocks, kv(s, n), kv(s + 1, n), n);
    be_.flash_attention_block_backward(dqkv, dkv(s, n), dout, qkv, kv(s, n), out, lse, positions(),
                                       positions_of(source(s)), B, T, T, Hl_, KVl_, hs_);
    // Passed on; after the last step the hop takes each gradient home.
    cp_.start_shift(ContextParallel::block_grads, dkv(s, n), dkv(s + 1, n), n);
    cp_.finish_shift(ContextParallel::block_grads);
    cp_.finish_shift(ContextParallel::blocks);
  }
  // dkv(steps) now holds this rank's own block's gradient from every rank.
  be_.copy_columns(dqkv + Hl_ * hs_, Q, dkv(steps, n), W, N, W);
}

}  // namespace tera

namespace tera {

void SingleRankContextParallel::unreachable() {
  TERA_ASSERT(false, "a shift on a context-parallel group of one rank (cp = 1 runs no ring)");
  std::abort();
}

}  // namespace tera
