// AdamW over a contiguous range [begin, end) of the flat parameter arena.
// Weight decay applies to weight matrices and embeddings only (ParamInfo::
// weight_decay), never to biases or LayerNorm gains/biases: decaying those
// pulls normalisation and offsets toward 0 for no regularisation benefit
// (GPT-2/3 and nanoGPT practice). The range is the whole arena on one
// process; with ZeRO it is this rank's shard, and m/v exist only for it.
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
  AdamW(const ParamTable& table, AdamWConfig cfg, int64_t begin, int64_t end);
  AdamW(const ParamTable& table, AdamWConfig cfg) : AdamW(table, cfg, 0, table.total_floats()) {}

  // params/grads point at the arena base (global offsets). step is 1-based.
  // grad_scale multiplies every gradient first (the clipping coefficient).
  void step(const Backend& be, float* params, const float* grads, float lr, float grad_scale, int64_t step);

  float* m() { return m_.base(); }
  float* v() { return v_.base(); }
  int64_t begin() const { return begin_; }
  int64_t end() const { return end_; }
  int64_t bytes() const { return m_.bytes() + v_.bytes(); }

 private:
  struct Segment {
    int64_t begin, end;  // arena offsets
    bool decay;
  };
  AdamWConfig cfg_;
  int64_t begin_, end_;
  std::vector<Segment> segments_;
  Arena m_, v_;
};

}  // namespace tera
