// AdamW in the kernel dialect: the update of kernels/cpu/elementwise.cpp
// (torch.optim.AdamW: decoupled decay applied to p first, bias corrections
// folded into the step size and the denominator), with the per-call scalars
// computed once on the host (AdamWScalars below) so every backend's update is
// the same fp32 arithmetic. The dry run counts, per block, the elements whose
// p, m or v would be non-finite, for the reduce kernels to add up.
#pragma once

#include "kernels/gpu/dialect.h"
#include "kernels/gpu/kernels/adamw_batch.h"
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

// Multi-tensor AdamW: up to kAdamWBatch tensors (AdamW segments) updated by
// one launch, their table passed by value as the kernel's argument (under
// 4 KB, the portable limit of a kernel's arguments), the elements of the
// tensors taken as one concatenated range by a grid-stride loop. So a step
// of a model's ~150 tensors is a few launches, not one per tensor.
struct AdamWTensor {
  float* param;
  const float* grad;
  float* m;
  float* v;
  uint16_t* bf16;  // optional: the rounded new param
  int64_t begin;   // its first element's index in the launch's range
  float decay;     // 1 - lr weight_decay, the only per-tensor scalar
};
struct AdamWBatch {
  AdamWTensor t[kAdamWBatch];  // 56 bytes each
  int count;
  int64_t total;  // elements over the tensors
  // Every device pointer of the table (gpu-emu translates them at launch, as
  // it does a kernel's pointer arguments).
  template <typename F>
  void for_each_pointer(F&& f) {
    for (int i = 0; i < count; ++i) {
      f(t[i].param);
      f(t[i].grad);
      f(t[i].m);
      f(t[i].v);
      f(t[i].bf16);
    }
  }
};

static_assert(sizeof(AdamWBatch) + sizeof(AdamWScalars) + sizeof(double*) <= 4096,
              "adamw_multi_k's arguments must fit the portable 4 KB");

// part == null: the update (param, m, v in place; the bf16 copy where
// given). Else a dry run: part[block] = the number of the block's elements
// whose update would be non-finite; nothing else written.
TERA_KERNEL adamw_multi_k(AdamWBatch b, AdamWScalars k, double* part) {
  TERA_SHARED(double, scratch, 256 / 32);
  double bad = 0.0;
  int s = -1;  // the tensor of element i; i only grows, so s only moves forward
  for (int64_t i = grid_first(); i < b.total; i += grid_stride()) {
    if (s < 0) {
      int lo = 0, hi = b.count - 1;  // the last tensor beginning at or before i
      while (lo < hi) {
        const int mid = (lo + hi + 1) / 2;
        if (b.t[mid].begin <= i) {
          lo = mid;
        } else {
          hi = mid - 1;
        }
      }
      s = lo;
    }
    while (s + 1 < b.count && b.t[s + 1].begin <= i) ++s;
    const AdamWTensor& t = b.t[s];
    const int64_t j = i - t.begin;
    AdamWScalars kt = k;
    kt.decay = t.decay;
    float p = t.param[j], mi = t.m[j], vi = t.v[j];
    const bool finite = adamw_one(p, mi, vi, t.grad[j], kt);
    if (part == nullptr) {
      t.param[j] = p;
      t.m[j] = mi;
      t.v[j] = vi;
      if (t.bf16 != nullptr) t.bf16[j] = float_to_bf16(p);
    } else {
      bad += finite ? 0.0 : 1.0;
    }
  }
  if (part != nullptr) {
    bad = block_sum(bad, scratch);
    if (thread_x() == 0) part[block_x()] = bad;
  }
}

TERA_GPU_END
