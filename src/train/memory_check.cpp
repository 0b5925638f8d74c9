// Memory needed before allocation; see memory_check.h.
#include "train/memory_check.h"

#include <algorithm>
#include <cstdlib>
#include <fmt/format.h>

#include "core/format.h"
#include "train/host_memory.h"
#include "train/rank_plan.h"

namespace tera {

MemoryReport estimate_rank_memory(const RunConfig& cfg, const ParallelLayout& layout, const ParallelLayout::Coord& coord) {
  return rank_plan(cfg, layout, coord).bytes;
}

std::string host_memory_refusal(const MemoryReport& need, int ranks_on_node, int rank) {
  const char* root = std::getenv("TERA_TEST_HOST_ROOT");  // tests: a fake /proc and /sys/fs/cgroup
  const HostMemory m = read_host_memory(root != nullptr && *root ? root : "/");
  return memory_refusal(need, m.available(), ranks_on_node, rank, "host memory (" + m.describe() + ")");
}

std::string memory_refusal(const MemoryReport& need, int64_t available, int ranks_on_node, int rank,
                           std::string_view memory) {
  if (available <= 0) return "";  // unknown: let the allocator decide
  const int64_t per_rank = available / std::max(1, ranks_on_node);
  if (need.total() <= per_rank) return "";
  std::string classes;
  for (MemoryClass c : kAllMemoryClasses) {
    if (need[c] == 0) continue;
    classes += fmt::format("{}{} {}", classes.empty() ? "" : ", ", memory_class_name(c), human_bytes(need[c]));
  }
  return fmt::format(
      "rank {} needs at least {} ({}) but "
      "{} of {} is available{}; make it fit with a smaller train.micro_batch, train.recompute = \"full\", a higher "
      "parallel.zero, or more ranks in parallel.tp / parallel.pp (`tera plan` lists the layouts that fit)",
      rank, human_bytes(need.total()), classes, human_bytes(per_rank), memory,
      ranks_on_node > 1 ? fmt::format(" to each of the {} ranks on this node ({} in all)", ranks_on_node,
                                      human_bytes(available))
                        : "");
}

}  // namespace tera
