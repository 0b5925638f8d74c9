// Weak and strong scaling sweeps: one simulated step per GPU count. Replicas
// are identical, so each point simulates one replica's pipeline and prices
// the data-parallel collectives by formula (collectives.h): a point costs the
// same at 100,000 GPUs as at 8. Weak scaling keeps the batch per replica of the
// first point (global batch = B0 * N / N0); strong scaling keeps B0. A fixed
// layout keeps tp, pp, vpp, micro-batch, ZeRO, sp and recompute and scales dp
// = N / (tp * pp); --replan searches the best layout at every point.
// Efficiency = (tokens/s per GPU at N) / (tokens/s per GPU at the first point).
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "plan/failure_model.h"
#include "plan/search.h"

namespace tera {

// What the planner prices: GPU counts, global batches (sequences per step)
// and sequence lengths beyond these are refused as flags and skipped as
// sweep points. Far beyond any published run, small enough that the
// schedules and sizes of a plan stay in memory and in range.
inline constexpr int64_t kMaxPlanGpus = int64_t{1} << 30;
inline constexpr int64_t kMaxPlanGlobalBatch = int64_t{1} << 24;
inline constexpr int64_t kMaxPlanSeq = int64_t{1} << 24;

enum class SweepKind { weak, strong };
const char* sweep_kind_name(SweepKind k);

struct SweepOptions {
  SweepKind kind = SweepKind::weak;
  std::vector<int64_t> gpus;     // the points, ascending; the first is the reference
  int64_t global_batch = 0;      // at the first point
  std::optional<ParallelLayout> layout;  // fixed layout (its dp is recomputed per point); none: replan
  SearchSpace space;             // constraints for replanning
  std::optional<FailureModel> failures;
  double train_tokens = 0;       // > 0: time to train per point
};

struct SweepPoint {
  int64_t gpus = 0;
  int64_t global_batch = 0;
  Evaluation eval;
  double efficiency = 0;
  std::optional<FailureEstimate> failure;
  double time_to_train_s = 0;  // train_tokens / (tokens/s x goodput when failures are modelled)
};

struct SweepResult {
  std::vector<SweepPoint> points;
  std::vector<std::string> skipped;  // "131072 GPUs: <why>", points that could not run
};

// GPU counts from..to: doubling, then `to` itself rounded down to a multiple
// of `granule` when the doubling does not land on it. Fails naming --from/--to.
Expected<std::vector<int64_t>> doubling_points(int64_t from, int64_t to, int64_t granule);
// "8,16,64" -> ascending, unique, positive counts (the flag name in messages).
Expected<std::vector<int64_t>> parse_points(const std::string& text);

// Runs the sweep. Fails (naming the factor) when the first point cannot run;
// later points that cannot run (a batch dp does not divide, no fitting layout)
// go to `skipped`. A fixed layout that does not fit is still simulated and
// marked (Evaluation::fits).
Expected<SweepResult> run_sweep(const ModelSpec& spec, const Workload& w, const Cluster& cl, const SweepOptions& o);

}  // namespace tera
