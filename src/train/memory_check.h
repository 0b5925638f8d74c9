// Limits before allocation: what one rank of a layout will allocate, from
// ModelSpec's tables and the layout (the same tables the arenas are carved
// from), against the memory this machine can give it. The run is refused
// before the first arena is allocated, never killed by the OOM killer or
// stopped by a failed allocation halfway through start-up.
#pragma once

#include <cstdint>
#include <string>

#include "core/parallel_layout.h"
#include "config/run_config.h"

namespace tera {

struct RankMemoryEstimate {
  int64_t params = 0;       // the parameter arena (+ ZeRO-3's gathered blocks)
  int64_t grads = 0;        // gradients, the reduced shard, ZeRO-2/3 staging and reduce-scatter outputs
  int64_t optimizer = 0;    // Adam moments of the segments this rank updates
  int64_t activations = 0;  // the schedule's in-flight micro-batches (ModelSpec::stage_activation_bytes)
  int64_t workspace = 0;    // ModelSpec::workspace_bytes
  int64_t total() const { return params + grads + optimizer + activations + workspace; }
};

// Bytes rank `coord` of `layout` allocates in its arenas, class by class,
// from the tables the arenas are carved from (zero_arena_sizes,
// ModelSpec's activation and workspace tables): equal to the engine's memory
// report (tests/train/test_memory_check.cpp). cfg must be valid for the
// layout (check_layout passed).
RankMemoryEstimate estimate_rank_memory(const RunConfig& cfg, const ParallelLayout& layout, const ParallelLayout::Coord& coord);

// Bytes this process may still allocate: MemAvailable from /proc/meminfo,
// or the cgroup's limit less its usage when that is smaller. 0: unknown.
int64_t available_host_memory();

// "" when `need` fits in `available` / ranks_on_node; else the message that
// refuses the run (bytes needed per class, bytes available, what to change).
std::string memory_refusal(const RankMemoryEstimate& need, int64_t available, int ranks_on_node, int rank);

}  // namespace tera
