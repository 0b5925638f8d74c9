// AdamW over a list of segments of the parameter arena that this rank
// updates: the whole arena on one process, this rank's shards under ZeRO.
// m and v exist only for the segments, stored back to back.
// Weight decay applies to weight matrices and embeddings only (ParamInfo::
// weight_decay), never to biases or LayerNorm gains/biases: decaying those
// pulls normalisation and offsets toward 0 for no regularisation benefit
// (GPT-2/3 and nanoGPT practice).
#pragma once

#include <cstdint>
#include <vector>

#include "core/arena.h"
#include "kernels/backend.h"
#include "model/param_table.h"
#include "optim/adamw_config.h"

namespace tera {

class AdamW {
 public:
  struct Segment {
    int64_t begin, end;  // arena offsets (global parameter index space)
    bool decay;
    bool tp_split;  // the tensor is split across tensor-parallel ranks (for the global norm)
  };
  struct Span {
    float* param;       // param[0 .. end-begin)
    const float* grad;  // grad[0 .. end-begin)
  };

  AdamW(AdamWConfig cfg, std::vector<Segment> segments);
  // Every parameter element of the table (one process, or ZeRO-0).
  static std::vector<Segment> segments_of(const ParamTable& table);
  // The table's parameters intersected with arena ranges [begin, end).
  static std::vector<Segment> segments_of(const ParamTable& table, const std::vector<std::pair<int64_t, int64_t>>& ranges);

  const std::vector<Segment>& segments() const { return segments_; }
  // spans[i] addresses segments()[i]. step is 1-based; grad_scale multiplies
  // every gradient first (the clipping coefficient).
  void step(const Backend& be, const std::vector<Span>& spans, float lr, float grad_scale, int64_t step);

  float* m() { return m_.base(); }
  float* v() { return v_.base(); }
  // Where segment i's moments start in m() and v().
  int64_t state_offset(size_t i) const { return state_offset_[i]; }
  int64_t bytes() const { return m_.bytes() + v_.bytes(); }

 private:
  AdamWConfig cfg_;
  std::vector<Segment> segments_;
  std::vector<int64_t> state_offset_;  // where segment i's m/v start
  Arena m_, v_;
};

}  // namespace tera
