// Softmax cross-entropy in phases (kernels/ops.h: ce_max, ce_exp_sum,
// ce_finalize; a vocabulary split over ranks reduces between them) and the
// generation softmax, in the kernel dialect. One block per row; the row max
// and the row sum are block reductions (the sum in double, as the CPU's).
#pragma once

#include "kernels/gpu/dialect.h"
#include "kernels/gpu/kernels/elementwise.cuh"

TERA_GPU_BEGIN

constexpr int kCeThreads = 256;

// rowmax[n] = max of logits[n, 0:valid) (-inf if valid == 0); grid (N).
TERA_KERNEL ce_max_k(float* rowmax, const float* logits, int64_t valid, int64_t ld) {
  TERA_SHARED(float, scratch, kCeThreads / 32);
  const float* row = logits + static_cast<int64_t>(block_x()) * ld;
  float m = -INFINITY;
  for (int64_t j = thread_x(); j < valid; j += block_dim_x()) m = row[j] > m ? row[j] : m;
  m = block_max(m, scratch);
  if (thread_x() == 0) rowmax[block_x()] = m;
}

// logits <- exp(l - m) (padding 0); sums[n] = their sum; target_logit[n] =
// l[y - v0] if the target is local, else 0; grid (N).
TERA_KERNEL ce_exp_sum_k(float* sums, float* target_logit, float* logits, const int32_t* targets,
                         const float* rowmax, int64_t valid, int64_t ld, int64_t v0) {
  TERA_SHARED(double, scratch, kCeThreads / 32);
  const int64_t n = block_x();
  float* row = logits + n * ld;
  const int64_t y = static_cast<int64_t>(targets[n]) - v0;
  const float target = (targets[n] >= 0 && y >= 0 && y < valid) ? row[y] : 0.0f;
  block_sync();  // every thread has read the target logit before it is overwritten
  const float mx = rowmax[n];
  double z = 0.0;
  for (int64_t j = thread_x(); j < ld; j += block_dim_x()) {
    const float e = j < valid ? expf(row[j] - mx) : 0.0f;
    row[j] = e;
    z += static_cast<double>(e);
  }
  z = block_sum(z, scratch);
  if (thread_x() == 0) {
    sums[n] = static_cast<float>(z);
    target_logit[n] = target;
  }
}

// losses[n] = log Z + m - l_y; logits <- dloss (e / Z - onehot); ignored
// targets (< 0): loss 0 and gradient 0; grid (N).
TERA_KERNEL ce_finalize_k(float* losses, float* logits, const int32_t* targets, const float* rowmax, const float* sums,
                          const float* target_logit, int64_t valid, int64_t ld, int64_t v0, float dloss) {
  const int64_t n = block_x();
  float* row = logits + n * ld;
  if (targets[n] < 0) {
    for (int64_t j = thread_x(); j < ld; j += block_dim_x()) row[j] = 0.0f;
    if (thread_x() == 0) losses[n] = 0.0f;
    return;
  }
  const double Z = static_cast<double>(sums[n]);
  const float scale = static_cast<float>(static_cast<double>(dloss) / Z);
  const int64_t y = static_cast<int64_t>(targets[n]) - v0;
  for (int64_t j = thread_x(); j < valid; j += block_dim_x()) row[j] = row[j] * scale - (j == y ? dloss : 0.0f);
  if (thread_x() == 0) {
    losses[n] = static_cast<float>(log(Z) + static_cast<double>(rowmax[n]) - static_cast<double>(target_logit[n]));
  }
}

// probs[0:V) = softmax(logits / temperature) of one row; one block.
TERA_KERNEL softmax_row_k(float* probs, const float* logits, int64_t V, float temperature) {
  TERA_SHARED(double, dscratch, kCeThreads / 32);
  TERA_SHARED(float, fscratch, kCeThreads / 32);
  float m = -INFINITY;
  for (int64_t j = thread_x(); j < V; j += block_dim_x()) m = logits[j] > m ? logits[j] : m;
  m = block_max(m, fscratch);
  double z = 0.0;
  for (int64_t j = thread_x(); j < V; j += block_dim_x()) {
    const float e = static_cast<float>(exp(static_cast<double>((logits[j] - m) / temperature)));
    probs[j] = e;
    z += static_cast<double>(e);
  }
  z = block_sum(z, dscratch);
  for (int64_t j = thread_x(); j < V; j += block_dim_x()) probs[j] = static_cast<float>(probs[j] / z);
}

TERA_GPU_END
