// The rank plan (partition/rank_plan.h) of a training run: its batch and
// precision read off the run config. The engine builds exactly this plan; the
// memory check before allocation reads it (memory_check.h).
#pragma once

#include "config/run_config.h"
#include "partition/parallel_layout.h"
#include "partition/rank_plan.h"

namespace tera {

// Sequences per step and their length (train.global_batch, model.seq_len).
RankBatch rank_batch(const RunConfig& cfg);
// tera's runtime: fp32 activations, GEMM inputs in train.precision, the
// model's attention, no dropout.
RankPrecision rank_precision(const RunConfig& cfg);
// The plan of rank `coord` of `layout` (dp derived) for cfg, which must be
// valid for the layout (check_layout passed).
RankPlan rank_plan(const RunConfig& cfg, const ParallelLayout& layout, const ParallelLayout::Coord& coord);

}  // namespace tera
