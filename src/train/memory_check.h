// Limits before allocation: what one rank of a layout will allocate, from
// ModelSpec's tables and the layout (the same tables the arenas are carved
// from), against the memory this machine can give it. The run is refused
// before the first arena is allocated, never killed by the OOM killer or
// stopped by a failed allocation halfway through start-up.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "partition/parallel_layout.h"
#include "config/run_config.h"
#include "partition/memory_report.h"

namespace tera {

// Bytes rank `coord` of `layout` allocates, class by class: its memory
// plan's (rank_plan.h), which the engine allocates exactly
// (tests/train/test_memory_check.cpp). cfg must be valid for the layout
// (check_layout passed).
MemoryReport estimate_rank_memory(const RunConfig& cfg, const ParallelLayout& layout, const ParallelLayout::Coord& coord);

// "" when `need` fits in the host memory this process may allocate
// (train/host_memory.h: MemAvailable and the cgroup limit that applies,
// read under $TERA_TEST_HOST_ROOT when tests set it, else /) shared by
// ranks_on_node ranks; else memory_refusal's message, naming both figures.
std::string host_memory_refusal(const MemoryReport& need, int ranks_on_node, int rank);

// "" when `need` fits in `available` / ranks_on_node; else the message that
// refuses the run (bytes needed per class, bytes available and of what:
// `memory` is "host memory" or "<backend> device memory", what to change).
std::string memory_refusal(const MemoryReport& need, int64_t available, int ranks_on_node, int rank,
                           std::string_view memory = "host memory");

}  // namespace tera
