// A training run's rank plan from its config.
#include "train/rank_plan.h"

namespace tera {

RankBatch rank_batch(const RunConfig& cfg) {
  return RankBatch{.global_batch = cfg.train.global_batch, .seq_len = cfg.model.seq_len};
}

RankPrecision rank_precision(const RunConfig& cfg) {
  return RankPrecision{.gemm = cfg.train.precision,
                       .activations = DType::f32,
                       .flash_attention = cfg.model.attention == AttentionKind::flash,
                       .dropout = false};
}

RankPlan rank_plan(const RunConfig& cfg, const ParallelLayout& layout, const ParallelLayout::Coord& coord) {
  return make_rank_plan(ModelSpec(cfg.model), layout, coord, rank_batch(cfg), rank_precision(cfg));
}

}  // namespace tera
