// The step's reductions in the kernel dialect, deterministic (no atomics): a
// range is summed by a fixed grid of blocks, each writing one partial, and
// one block then adds the partials in a fixed tree (kernels/ops.h's sum of
// squares, non-finite count and loss sum; accumulated in double).
#pragma once

#include "kernels/gpu/dialect.h"
#include "kernels/gpu/kernels/elementwise.cuh"

TERA_GPU_BEGIN

constexpr int kReduceThreads = 256;
constexpr int kReduceMaxBlocks = 256;  // partials per range

enum class Reduce : int { sum, sum_squares, nonfinite };

// part[block] = this block's share of the reduction of x[0, n); grid (<= 256).
TERA_KERNEL reduce_partials_k(double* part, const float* x, int64_t n, int what) {
  TERA_SHARED(double, scratch, kReduceThreads / 32);
  double acc = 0.0;
  for (int64_t i = grid_first(); i < n; i += grid_stride()) {
    const float v = x[i];
    if (what == static_cast<int>(Reduce::sum)) {
      acc += static_cast<double>(v);
    } else if (what == static_cast<int>(Reduce::sum_squares)) {
      acc += static_cast<double>(v) * static_cast<double>(v);
    } else {
      acc += (float_bits(v) & 0x7f800000u) == 0x7f800000u ? 1.0 : 0.0;  // exponent all ones: inf or nan
    }
  }
  acc = block_sum(acc, scratch);
  if (thread_x() == 0) part[block_x()] = acc;
}

// out[0] (+)= the sum of part[0, count); one block.
TERA_KERNEL reduce_finish_k(double* out, const double* part, int count, int accumulate) {
  TERA_SHARED(double, scratch, kReduceThreads / 32);
  double acc = 0.0;
  for (int i = thread_x(); i < count; i += block_dim_x()) acc += part[i];
  acc = block_sum(acc, scratch);
  if (thread_x() == 0) out[0] = accumulate != 0 ? out[0] + acc : acc;
}

TERA_GPU_END
