// Memory needed before allocation; see memory_check.h.
#include "train/memory_check.h"

#include <algorithm>
#include <fstream>
#include <sstream>
#include <fmt/format.h>

#include "core/format.h"
#include "model/model_spec.h"
#include "model/param_table.h"
#include "parallel/pipeline.h"
#include "parallel/schedule.h"
#include "parallel/zero.h"
#include "core/tensor.h"
#include "train/engine.h"
#include "model/layout_check.h"

namespace tera {

RankMemoryEstimate estimate_rank_memory(const RunConfig& cfg, const ParallelLayout& layout, const ParallelLayout::Coord& coord) {
  const ParallelLayout& p = cfg.parallel;
  const ModelSpec spec(cfg.model);
  auto plan = stage_plan_for(cfg, coord.pp);
  const int64_t micro = micro_batches_per_step(layout, cfg.train.global_batch);
  auto sched = make_schedule(p.schedule, layout.pp, static_cast<int>(micro), p.vpp);
  RankMemoryEstimate m;
  if (!plan || !sched) return m;  // the caller validated the layout; nothing to add
  const ParamTable table(spec, int64_t{layout.dp} * ArenaLayout::kAlignFloats, layout.tp, coord.tp, *plan);
  const ZeroArenaSizes z = zero_arena_sizes(table, layout.dp, coord.dp, p.zero);
  auto bytes = [](int64_t floats) { return round_up(floats, ArenaLayout::kAlignFloats) * 4; };  // as Arena allocates
  m.params = bytes(z.params) + bytes(z.gathered);
  m.grads = bytes(z.grads) + bytes(z.grad_shard) + bytes(z.staging) + bytes(z.temps);
  m.optimizer = 2 * bytes(z.moments);
  const ActivationOptions opts{.tp = layout.tp, .sequence_parallel = p.sequence_parallel, .recompute = cfg.parallel.recompute};
  const int64_t B = cfg.parallel.micro_batch, T = cfg.model.seq_len;
  m.activations = spec.stage_activation_bytes(B, T, opts, *plan, slots_per_chunk(*sched, coord.pp));
  m.workspace = spec.workspace_bytes(B, T, opts);
  return m;
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

std::string memory_refusal(const RankMemoryEstimate& need, int64_t available, int ranks_on_node, int rank) {
  if (available <= 0) return "";  // unknown: let the allocator decide
  const int64_t per_rank = available / std::max(1, ranks_on_node);
  if (need.total() <= per_rank) return "";
  return fmt::format(
      "rank {} needs at least {} (parameters {}, gradients {}, optimizer state {}, activations {}, workspace {}) but "
      "{} is available{}; make it fit with a smaller train.micro_batch, train.recompute = \"full\", a higher "
      "parallel.zero, or more ranks in parallel.tp / parallel.pp (`tera plan` lists the layouts that fit)",
      rank, human_bytes(need.total()), human_bytes(need.params), human_bytes(need.grads), human_bytes(need.optimizer),
      human_bytes(need.activations), human_bytes(need.workspace), human_bytes(per_rank),
      ranks_on_node > 1 ? fmt::format(" to each of the {} ranks on this node ({} in all)", ranks_on_node,
                                      human_bytes(available))
                        : "");
}

}  // namespace tera
