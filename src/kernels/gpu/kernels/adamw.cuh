// AdamW in the kernel dialect: the update of kernels/cpu/elementwise.cpp
// (torch.optim.AdamW: decoupled decay applied to p first, bias corrections
// folded into the step size and the denominator), with the per-call scalars
// computed once on the host (AdamWScalars below) so every backend's update is
// the same fp32 arithmetic. The dry run counts, per block, the elements whose
// p, m or v would be non-finite, for the reduce kernels to add up.
#pragma once

#include "kernels/gpu/dialect.h"
#include "kernels/gpu/kernels/elementwise.cuh"

TERA_GPU_BEGIN

struct AdamWScalars {
  float decay, step_size, inv_sqrt_bc2, b1, b2, eps, gs, omb1, omb2;
};

TERA_DEVICE bool adamw_one(float& p, float& m, float& v, float grad, const AdamWScalars& k) {
  const float g = grad * k.gs;
  m = k.b1 * m + k.omb1 * g;
  v = k.b2 * v + k.omb2 * g * g;
  p = p * k.decay - k.step_size * m / (sqrtf(v) * k.inv_sqrt_bc2 + k.eps);
  return isfinite(m) && isfinite(v) && isfinite(p);
}

// param, m, v updated in place; bf16 (optional): the rounded new param.
TERA_KERNEL adamw_k(float* param, const float* grad, float* m, float* v, uint16_t* bf16, int64_t n, AdamWScalars k) {
  for (int64_t i = grid_first(); i < n; i += grid_stride()) {
    float p = param[i], mi = m[i], vi = v[i];
    adamw_one(p, mi, vi, grad[i], k);
    param[i] = p;
    m[i] = mi;
    v[i] = vi;
    if (bf16 != nullptr) bf16[i] = float_to_bf16(p);
  }
}

// part[block] = the number of elements of this block whose update would be
// non-finite; nothing else written.
TERA_KERNEL adamw_nonfinite_k(double* part, const float* param, const float* grad, const float* m, const float* v,
                              int64_t n, AdamWScalars k) {
  TERA_SHARED(double, scratch, 256 / 32);
  double bad = 0.0;
  for (int64_t i = grid_first(); i < n; i += grid_stride()) {
    float p = param[i], mi = m[i], vi = v[i];
    bad += adamw_one(p, mi, vi, grad[i], k) ? 0.0 : 1.0;
  }
  bad = block_sum(bad, scratch);
  if (thread_x() == 0) part[block_x()] = bad;
}

TERA_GPU_END
