// Memory needed before allocation; see memory_check.h.
#include "train/memory_check.h"

#include <algorithm>
#include <fstream>
#include <sstream>
#include <fmt/format.h>

#include "core/format.h"
#include "train/rank_plan.h"

namespace tera {

MemoryReport estimate_rank_memory(const RunConfig& cfg, const ParallelLayout& layout, const ParallelLayout::Coord& coord) {
  return rank_memory_plan(cfg, layout, coord).report();
}

namespace {

// A number from a one-line cgroup file ("max": none).
int64_t read_cgroup_value(const char* path) {
  std::ifstream f(path);
  std::string s;
  if (!(f >> s) || s == "max") return 0;
  try {
    return std::stoll(s);
  } catch (...) {
    return 0;
  }
}

}  // namespace

int64_t available_host_memory() {
  int64_t avail = 0;
  std::ifstream f("/proc/meminfo");
  std::string line;
  while (std::getline(f, line)) {
    if (line.rfind("MemAvailable:", 0) == 0) {
      std::istringstream in(line.substr(13));
      int64_t kib = 0;
      if (in >> kib) avail = kib * 1024;
      break;
    }
  }
  const int64_t limit = read_cgroup_value("/sys/fs/cgroup/memory.max");
  if (limit > 0) {
    const int64_t left = std::max<int64_t>(0, limit - read_cgroup_value("/sys/fs/cgroup/memory.current"));
    avail = avail > 0 ? std::min(avail, left) : left;
  }
  return avail;
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
