// Layout search: enumerate tp, pp, dp, virtual chunks, schedule (zb-h1 beside
// 1f1b on a stack that has it), micro-batch, ZeRO stage, sequence parallelism
// and recompute for a GPU count; drop layouts
// that do not fit; rank the rest by simulated step time. Exact top-K by
// branch and bound: every fitting layout is priced and given a lower bound
// (simulator.h), then simulated in bound order until the bound exceeds the
// K-th best simulated time.
#pragma once

#include <cstdint>
#include <optional>
#include <vector>

#include "plan/memory_model.h"
#include "plan/simulator.h"

namespace tera {

struct Evaluation {
  ParallelLayout layout;
  MemoryBreakdown memory;
  bool fits = false;
  double step_time_s = 0;
  double tokens_per_s = 0;
  double tflops_per_gpu = 0;  // model FLOPs (no recompute) per second per GPU, in TFLOP/s
  double mfu = 0;             // model FLOPs utilisation against the precision's peak
  double hfu = 0;             // hardware FLOPs utilisation: model FLOPs plus what recompute re-runs
  double bubble = 0;          // share of the step the critical stage waits for messages
  SimResult sim;
};

// Prices one layout: schedule, memory, costs, simulation. The layout must
// pass check_layout.
Evaluation evaluate_layout(const ModelSpec& spec, const ParallelLayout& l, const Workload& w, const Cluster& cl);

// Fixed choices narrow the search; unset ones are searched.
struct SearchSpace {
  std::optional<int> tp, pp, dp, vpp, micro_batch, zero;
  std::optional<bool> sequence_parallel;
  std::optional<Recompute> recompute;
  std::optional<int> cp;  // context parallelism (searched for long sequences with fused attention)
  // FSDP's reshard_after_forward at ZeRO-3 (ParallelLayout); unset: on (not searched).
  std::optional<bool> reshard_after_forward;
  // Hybrid sharding (ParallelLayout::shard) of the ZeRO layouts: `whole`,
  // sharded over all dp x cp ranks (not searched); `also_node`, each also
  // with its states sharded over one node's worth of its data-parallel ranks
  // (node GPUs / tp) and replicated across nodes (plan --hybrid-shard);
  // `node`, only so (a run that says HSDP and no more).
  enum class Sharding { whole, also_node, node };
  Sharding sharding = Sharding::whole;
  // A run's stated replicas (torchtitan's dp_replicate): each shard group
  // spans dp x cp / zero_replicas ranks. Overrides `sharding`.
  std::optional<int> zero_replicas;
  int max_micro_batch = 64;
  // Only what tera's runtime runs (plan --emit tera): no selective recompute
  // (context parallelism and zb-h1 it runs; cp with flash attention).
  bool tera_runtime = false;
};

// The ZeRO shard groups searched for a layout (ParallelLayout::shard; 0: the
// whole dp x cp group) under space.sharding and space.zero_replicas: one
// node's worth of the dp x cp ranks per group (node GPUs / tp), or what a
// run's stated replicas leave. Empty: none fits the layout.
std::vector<int> shard_choices(const ParallelLayout& l, const Cluster& cl, const SearchSpace& space);

struct SearchResult {
  std::vector<Evaluation> best;  // fastest first, at most `top`
  int64_t enumerated = 0;        // layouts generated and checked for memory
  int64_t fitting = 0;           // of those, layouts that fit (each priced with a lower bound)
  int64_t simulated = 0;         // layouts whose schedule was simulated
  // The layout with the least memory per GPU (explains "nothing fits").
  std::optional<ParallelLayout> smallest;
  MemoryBreakdown smallest_memory;
};

SearchResult search_layouts(const ModelSpec& spec, const Workload& w, const Cluster& cl, int gpus,
                            const SearchSpace& space, int top);

}  // namespace tera
