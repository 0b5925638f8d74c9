// The loss, embedding, reduction and optimizer ops of ops.h as launches of
// the kernel dialect: the three-phase cross-entropy and its fused form,
// softmax rows, the vocab-parallel embedding and learned positions, the bf16
// tile GEMM primitive, the reductions (sums, sums of squares, non-finite
// counts) and AdamW in batches. Part of ops_launch.h's table
// (set_dialect_ops fills them).
#pragma once

#include <cstdint>

#include "kernels/gpu/device_context.h"
#include "kernels/gpu/kernels/adamw.cuh"
#include "kernels/gpu/kernels/cross_entropy.cuh"
#include "kernels/gpu/kernels/embedding.cuh"
#include "kernels/gpu/kernels/reduce.cuh"
#include "kernels/gpu/kernels/tile_gemm.cuh"

TERA_GPU_BEGIN
namespace launch {

inline void ce_max(DeviceContext& c, float* rowmax, const float* logits, int64_t N, int64_t valid, int64_t ld) {
  if (N > 0) TERA_LAUNCH(c, ce_max_k, grid_x(static_cast<unsigned>(N)), kCeThreads, 0, rowmax, logits, valid, ld);
}
inline void ce_exp_sum(DeviceContext& c, float* sums, float* target_logit, float* logits, const int32_t* targets, const float* rowmax,
                       int64_t N, int64_t valid, int64_t ld, int64_t v0) {
  if (N > 0) {
    TERA_LAUNCH(c, ce_exp_sum_k, grid_x(static_cast<unsigned>(N)), kCeThreads, 0, sums, target_logit, logits, targets,
                rowmax, valid, ld, v0);
  }
}
inline void ce_finalize(DeviceContext& c, float* losses, float* logits, const int32_t* targets, const float* rowmax, const float* sums,
                        const float* target_logit, int64_t N, int64_t valid, int64_t ld, int64_t v0, float dloss) {
  if (N > 0) {
    TERA_LAUNCH(c, ce_finalize_k, grid_x(static_cast<unsigned>(N)), kCeThreads, 0, losses, logits, targets, rowmax, sums,
                target_logit, valid, ld, v0, dloss);
  }
}
// The fused loss: the three phases on one rank, their row statistics in scratch.
inline void cross_entropy(DeviceContext& c, float* losses, float* logits, const int32_t* targets, int64_t N, int64_t V, int64_t Vp,
                          float dloss) {
  if (N <= 0) return;
  auto* stats = static_cast<float*>(c.scratch(3 * N * static_cast<int64_t>(sizeof(float))));
  ce_max(c, stats, logits, N, V, Vp);
  ce_exp_sum(c, stats + N, stats + 2 * N, logits, targets, stats, N, V, Vp, 0);
  ce_finalize(c, losses, logits, targets, stats, stats + N, stats + 2 * N, N, V, Vp, 0, dloss);
}
inline void softmax_row(DeviceContext& c, float* probs, const float* logits, int64_t V, float temperature) {
  if (V > 0) TERA_LAUNCH(c, softmax_row_k, grid_x(1), kCeThreads, 0, probs, logits, V, temperature);
}

inline void embedding_lookup(DeviceContext& c, float* out, const int32_t* tokens, const float* wte_local, int64_t v0, int64_t v1,
                             int64_t N, int64_t C) {
  if (N * C > 0) TERA_LAUNCH(c, embedding_lookup_k, grid_x(blocks_for(N * C)), kThreads, 0, out, tokens, wte_local, v0, v1, N, C);
}
inline void embedding_lookup_backward(DeviceContext& c, float* dwte_local, const float* dout, const int32_t* tokens, int64_t v0,
                                      int64_t v1, int64_t N, int64_t C) {
  if (C > 0 && v1 > v0) {
    const int64_t parts = std::min<int64_t>(kEmbeddingRowParts, v1 - v0);
    TERA_LAUNCH(c, embedding_backward_k, grid_xy(static_cast<unsigned>((C + kThreads - 1) / kThreads),
                                                 static_cast<unsigned>(parts)),
                kThreads, 0, dwte_local, dout, tokens, v0, v1, N, C);
  }
}
inline void position_add(DeviceContext& c, float* out, const float* wpe, int64_t n0, int64_t N, int64_t T, int64_t C) {
  if (N * C > 0) TERA_LAUNCH(c, position_add_k, grid_x(blocks_for(N * C)), kThreads, 0, out, wpe, n0, N, T, C);
}
inline void position_add_backward(DeviceContext& c, float* dwpe, const float* dout, int64_t n0, int64_t N, int64_t T, int64_t C) {
  if (T * C > 0) TERA_LAUNCH(c, position_add_backward_k, grid_x(blocks_for(T * C)), kThreads, 0, dwpe, dout, n0, N, T, C);
}

inline void tile_gemm_bf16(DeviceContext& c, float* C, const uint16_t* A, const uint16_t* B, int64_t M, int64_t N, int64_t K) {
  if (M <= 0 || N <= 0) return;
  TERA_LAUNCH(c, tile_gemm_bf16_k, grid_xy(static_cast<unsigned>(N / 16), static_cast<unsigned>(M / 16)), c.warp,
              0, C, A, B, N, K);
}

// out (+)= reduction of x[0, n): partials from a fixed grid, then one block.
inline void reduce_into(DeviceContext& c, double* out, const float* x, int64_t n, Reduce what, bool accumulate) {
  const unsigned blocks = n <= 0 ? 1u
                                 : static_cast<unsigned>(std::min<int64_t>((n + kReduceThreads - 1) / kReduceThreads,
                                                                           kReduceMaxBlocks));
  auto* part = static_cast<double*>(c.scratch(kReduceMaxBlocks * static_cast<int64_t>(sizeof(double))));
  TERA_LAUNCH(c, reduce_partials_k, grid_x(blocks), kReduceThreads, 0, part, x, n, static_cast<int>(what));
  TERA_LAUNCH(c, reduce_finish_k, grid_x(1), kReduceThreads, 0, out, static_cast<const double*>(part),
              static_cast<int>(blocks), accumulate ? 1 : 0);
}

inline void accumulate_sum(DeviceContext& c, double* acc, const float* x, int64_t n) { reduce_into(c, acc, x, n, Reduce::sum, true); }

// out[g] = the reduction over group g's segments, added in segment order.
inline void reduce_segments(DeviceContext& c, double* out, const SegmentRef* segs, int64_t nsegs, int64_t groups, Reduce what) {
  fill(c, out, DType::f64, 0.0, groups);
  for (int64_t k = 0; k < nsegs; ++k) reduce_into(c, out + segs[k].group, segs[k].data, segs[k].n, what, true);
}
inline void sum_squares(DeviceContext& c, double* out, const SegmentRef* segs, int64_t nsegs, int64_t groups) {
  reduce_segments(c, out, segs, nsegs, groups, Reduce::sum_squares);
}
inline void count_nonfinite(DeviceContext& c, double* out, const SegmentRef* segs, int64_t nsegs, int64_t groups) {
  reduce_segments(c, out, segs, nsegs, groups, Reduce::nonfinite);
}

// The per-call scalars, as kernels/cpu/elementwise.cpp computes them.
// 1 - lr wd: the only per-tensor scalar of the update.
inline float adamw_decay(const AdamWArgs& a, float wd) { return static_cast<float>(1.0 - static_cast<double>(a.lr) * wd); }

inline AdamWScalars adamw_scalars(const AdamWArgs& a, float wd) {
  const double bc1 = 1.0 - std::pow(static_cast<double>(a.beta1), static_cast<double>(a.step));
  const double bc2 = 1.0 - std::pow(static_cast<double>(a.beta2), static_cast<double>(a.step));
  AdamWScalars k{};
  k.decay = adamw_decay(a, wd);
  k.step_size = static_cast<float>(a.lr / bc1);
  k.inv_sqrt_bc2 = static_cast<float>(1.0 / std::sqrt(bc2));
  k.b1 = a.beta1;
  k.b2 = a.beta2;
  k.eps = a.eps;
  k.gs = a.grad_scale;
  k.omb1 = 1.0f - k.b1;
  k.omb2 = 1.0f - k.b2;
  return k;
}

// The segments in batches of up to kAdamWBatch tensors, one launch each
// (adamw.cuh); the dry run adds every batch's count into nonfinite[0].
inline void adamw(DeviceContext& c, const AdamWSegment* segs, int64_t nsegs, const AdamWArgs& a, double* nonfinite) {
  if (nonfinite != nullptr) fill(c, nonfinite, DType::f64, 0.0, 1);
  const AdamWScalars k = adamw_scalars(a, 0.0f);  // the per-tensor decay goes in the table
  AdamWBatch batch{};
  auto flush = [&] {
    if (batch.count == 0) return;
    if (nonfinite == nullptr) {
      TERA_LAUNCH(c, adamw_multi_k, grid_x(blocks_for(batch.total)), kThreads, 0, batch, k, static_cast<double*>(nullptr));
    } else {
      const unsigned blocks = static_cast<unsigned>(std::min<int64_t>(blocks_for(batch.total), kReduceMaxBlocks));
      auto* part = static_cast<double*>(c.scratch(kReduceMaxBlocks * static_cast<int64_t>(sizeof(double))));
      TERA_LAUNCH(c, adamw_multi_k, grid_x(blocks), kThreads, 0, batch, k, part);
      TERA_LAUNCH(c, reduce_finish_k, grid_x(1), kReduceThreads, 0, nonfinite, static_cast<const double*>(part),
                  static_cast<int>(blocks), 1);
    }
    batch = AdamWBatch{};
  };
  for (int64_t s = 0; s < nsegs; ++s) {
    const AdamWSegment& seg = segs[s];
    if (seg.n <= 0) continue;
    batch.t[batch.count] = AdamWTensor{seg.param, seg.grad, seg.m, seg.v, seg.param_bf16, batch.total,
                                       adamw_decay(a, seg.weight_decay)};
    batch.total += seg.n;
    if (++batch.count == kAdamWBatch) flush();
  }
  flush();
}

}  // namespace launch
TERA_GPU_END
