// Whether a parallel layout (partition/parallel_layout.h) can run a model and a
// batch on a world of ranks: the one check that the run config, the trainer,
// the planner and `tera ckpt reshard` share, so the planner accepts exactly
// the layouts the runtime runs. Pure (no backend, no MPI).
#pragma once

#include <cstdint>
#include <vector>

#include "partition/parallel_layout.h"
#include "core/status.h"
#include "model/model_spec.h"

namespace tera {

// Checks every factor of `l` against the model's shape, the global batch
// (sequences per optimizer step; <= 0: not known yet, batch checks skipped)
// and the world size (<= 0: not known yet; l.dp = 0 is then left to derive).
// The message lists every check that fails, each naming its factors and the
// config keys (parallel.tp, train.micro_batch, model.heads, ...), e.g.
// "parallel.tp (2) * parallel.pp (4) * parallel.dp (3) = 24 != world size 16".
Status check_layout(const ParallelLayout& l, const ModelConfig& m, int64_t global_batch, int world);

// Micro-batches per pipeline per step: global_batch / (dp * micro_batch).
int64_t micro_batches_per_step(const ParallelLayout& l, int64_t global_batch);

// Layers of each of the pp * vpp virtual stages: l.stage_layers when given,
// else balanced (partition/stage_plan.h). Assumes check_layout passed.
std::vector<int64_t> virtual_stage_layers(const ParallelLayout& l, int64_t layers);
// Layers of virtual stage v (0 .. pp*vpp-1), the same split, without
// allocating (the planner's search calls it per candidate).
int64_t layers_in_virtual_stage(const ParallelLayout& l, int64_t layers, int v);

}  // namespace tera
