// What one rank of a run holds, before anything is built: its pipeline
// stage's plan and its memory plan (model/memory_plan.h) under the run's
// layout, ZeRO stage, recompute and schedule. The engine allocates exactly
// this plan; the memory check before allocation reads it (memory_check.h).
#pragma once

#include "config/run_config.h"
#include "core/parallel_layout.h"
#include "core/status.h"
#include "model/memory_plan.h"
#include "model/stage_plan.h"

namespace tera {

// The stage plan of `stage` under cfg (balanced, or parallel.stage_layers).
Expected<StagePlan> stage_plan_for(const RunConfig& cfg, int stage);

// The memory plan of rank `coord` of `layout` (dp derived) for cfg, which
// must be valid for the layout (check_layout passed).
MemoryPlan rank_memory_plan(const RunConfig& cfg, const ParallelLayout& layout, const ParallelLayout::Coord& coord);

}  // namespace tera
