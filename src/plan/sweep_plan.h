// The sweep driver of `tera simulate --sweep`: from what was asked (the
// points or a from..to range, a fixed layout or none, replanning or not) to
// the SweepOptions that plan/scaling.h's run_sweep runs, and the notes that
// explain a point's efficiency above 100% afterwards.
//
// Without a layout and without replanning, the layout is the best one at
// the first point (search_layouts), held fixed while dp grows, as the
// studies measured weak scaling. A from..to range doubles from `from` and
// ends on `to` rounded down to whole nodes, or to whole replicas
// (tp * pp * cp GPUs) of a fixed layout.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "plan/scaling.h"

namespace tera {

struct SweepRequest {
  SweepKind kind = SweepKind::weak;
  std::vector<int64_t> points;           // given points, ascending (empty: from..to)
  int64_t from = 0, to = 0;
  std::optional<ParallelLayout> layout;  // a fixed layout, its dp for the first point
  bool replan = false;                   // search the best layout at every point (no layout)
};

struct SweepPlan {
  SweepOptions options;        // kind, points, global batch, layout; the caller adds failures and train_tokens
  bool planned_first = false;  // the layout is the first point's best, held fixed
};

// Messages say what to change ("no layout fits 8 GPUs at global batch 4096;
// give --layout or a larger --from", "--layout dp=2 does not match the
// first point: ...").
Expected<SweepPlan> plan_sweep(const Workload& w, const Cluster& cl, const SweepRequest& r);

// One line per point whose efficiency is above 100%, naming the cause other
// than scaling: "103.2% at 64 GPUs: a different batch per replica (...)".
std::vector<std::string> efficiency_notes(const SweepResult& r);

}  // namespace tera
