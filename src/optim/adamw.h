// AdamW over a list of segments of the parameter arena that this rank
// updates: the whole arena on one process, this rank's shards under ZeRO.
// m and v exist only for the segments, stored back to back: the memory
// plan's adam_m and adam_v (optimizer class), device memory. One step is one
// multi-tensor call of the backend's adamw over every segment.
// Weight decay applies to weight matrices and embeddings only (ParamInfo::
// weight_decay), never to biases or LayerNorm gains/biases: decaying those
// pulls normalisation and offsets toward 0 for no regularisation benefit
// (GPT-2/3 and nanoGPT practice).
#pragma once

#include <cstdint>
#include <vector>

#include "kernels/backend.h"
#include "partition/param_table.h"
#include "model/rank_memory.h"
#include "optim/adamw_config.h"

namespace tera {

class AdamW {
 public:
  struct Segment {
    int64_t begin, end;  // arena offsets (global parameter index space)
    bool decay;
    bool tp_split;  // the tensor is split across tensor-parallel ranks (for the global norm)
  };
  struct Span {          // device memory
    float* param;       // param[0 .. end-begin)
    const float* grad;  // grad[0 .. end-begin)
    uint16_t* param_bf16 = nullptr;  // optional: the update also writes bf16(param) here
  };

  // Binds the moments to the optimizer class of `memory` (adam_m, adam_v:
  // as many floats as the segments hold).
  AdamW(AdamWConfig cfg, std::vector<Segment> segments, const Backend& be, RankMemory& memory);
  // Every parameter element of the table (one process, or ZeRO-0).
  static std::vector<Segment> segments_of(const ParamTable& table);
  // The table's parameters intersected with arena ranges [begin, end).
  static std::vector<Segment> segments_of(const ParamTable& table, const std::vector<std::pair<int64_t, int64_t>>& ranges);

  const std::vector<Segment>& segments() const { return segments_; }
  // spans[i] addresses segments()[i]. step is 1-based; grad_scale multiplies
  // every gradient first (the clipping coefficient).
  void step(const std::vector<Span>& spans, float lr, float grad_scale, int64_t step);

  // Whether step() is certain to leave every parameter and moment finite,
  // from scalars alone (no pass over memory). grad_norm is the global norm
  // before clipping (finite). With finite moments built by this recurrence
  // from zero, |m_t| <= (1-b1)/sqrt(1-b2) * sqrt(v_t) * sum_k (b1/sqrt(b2))^k,
  // so when b1 < sqrt(b2) the update |lr/bc1 * m / (sqrt(v/bc2) + eps)| is at
  // most U = lr * sqrt(bc2)/bc1 * (1-b1) / (sqrt(1-b2) (1 - b1/sqrt(b2))),
  // whatever the gradients; v stays finite while every g^2 does (|g| is at
  // most the clipped global norm). Certain when that norm is below 1e18,
  // U <= 1e30, |1 - lr*wd| <= 1 and the parameters are below 1e38 in
  // magnitude (trained weights are O(1); 3.4e38 is float's largest).
  // Otherwise the caller runs update_is_finite, the exact check.
  bool update_certainly_finite(float lr, float grad_scale, double grad_norm, int64_t step) const;
  // Exact: computes every updated value as step() would (the same float
  // arithmetic) without writing any, counting the non-finite ones into
  // nonfinite[0] (device memory; the caller copies it to the host).
  void count_nonfinite_update(const std::vector<Span>& spans, float lr, float grad_scale, int64_t step,
                              double* nonfinite) const;

  // Device memory: the moments of every segment, back to back.
  float* m() { return m_; }
  float* v() { return v_; }
  // Where segment i's moments start in m() and v().
  int64_t state_offset(size_t i) const { return state_offset_[i]; }

 private:
  std::vector<AdamWSegment> batch(const std::vector<Span>& spans) const;
  AdamWArgs args(float lr, float grad_scale, int64_t step) const;
  AdamWConfig cfg_;
  std::vector<Segment> segments_;
  std::vector<int64_t> state_offset_;  // where segment i's m/v start
  const Backend& be_;
  float* m_ = nullptr;
  float* v_ = nullptr;
};

}  // namespace tera
