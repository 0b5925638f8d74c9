// Limits before allocation: what one rank of a layout will allocate, from
// ModelSpec's tables and the layout (the same tables the arenas are carved
// from), against the memory this machine can give it. The run is refused
// before the first arena is allocated, never killed by the OOM killer or
// stopped by a failed allocation halfway through start-up.
#pragma once

#include <cstdint>
#include <string>

#include "comm/layout.h"
#include "config/run_config.h"

namespace tera {

struct RankMemoryEstimate {
  int64_t params = 0;       // the parameter arena (this rank's shard under ZeRO-3)
  int64_t grads = 0;        // full gradients (ZeRO 0-1) + the reduced shard (ZeRO 1-3)
  int64_t optimizer = 0;    // Adam moments of the segments this rank updates
  int64_t activations = 0;  // the schedule's in-flight micro-batches (ModelSpec::stage_activation_bytes)
  int64_t workspace = 0;    // ModelSpec::workspace_bytes
  int64_t total() const { return params + grads + optimizer + activations + workspace; }
};

// Bytes rank `coord` of `layout` allocates in its arenas, less the ZeRO
// staging and gather buffers (a few blocks' worth): a lower bound that is
// within a few percent of the memory report for every layout tested.
// cfg must be valid for the layout (check_layout passed).
RankMemoryEstimate estimate_rank_memory(const RunConfig& cfg, const Layout& layout, const Layout::Coord& coord);

// Bytes this process may still allocate: MemAvailable from /proc/meminfo,
// or the cgroup's limit less its usage when that is smaller. 0: unknown.
int64_t available_host_memory();

// "" when `need` fits in `available` / ranks_on_node; else the message that
// refuses the run (bytes needed per class, bytes available, what to change).
std::string memory_refusal(const RankMemoryEstimate& need, int64_t available, int ranks_on_node, int rank);

}  // namespace tera
