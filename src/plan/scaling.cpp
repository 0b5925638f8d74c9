// Scaling sweeps (see scaling.h).
#include "plan/scaling.h"

#include "core/strings.h"

#include <fmt/format.h>

#include <algorithm>

namespace tera {

const char* sweep_kind_name(SweepKind k) { return k == SweepKind::weak ? "weak" : "strong"; }

Expected<std::vector<int64_t>> doubling_points(int64_t from, int64_t to, int64_t granule) {
  if (from < 1 || from > kMaxPlanGpus) return Status::error(fmt::format("--from {} must lie in [1, {}]", from, kMaxPlanGpus));
  if (to < from || to > kMaxPlanGpus) {
    return Status::error(fmt::format("--to {} must lie in [--from {}, {}]", to, from, kMaxPlanGpus));
  }
  std::vector<int64_t> p;
  for (int64_t n = from; n <= to; n *= 2) p.push_back(n);
  const int64_t last = granule > 0 ? to / granule * granule : to;
  if (last > p.back()) p.push_back(last);
  return p;
}

Expected<std::vector<int64_t>> parse_points(const std::string& text) {
  std::vector<int64_t> p;
  for (const std::string& item : split(text, ',')) {
    int64_t v = 0;
    if (!parse_int64(item, v) || v < 1 || v > kMaxPlanGpus) {
      return Status::error(fmt::format("--points: '{}' is not a GPU count in [1, {}]; write e.g. --points 8,16,64", item,
                                       kMaxPlanGpus));
    }
    p.push_back(v);
  }
  std::sort(p.begin(), p.end());
  p.erase(std::unique(p.begin(), p.end()), p.end());
  return p;
}

namespace {

// One point: the layout used and its evaluation, or why it cannot run.
Expected<Evaluation> run_point(const ModelSpec& spec, const Workload& w, const Cluster& cl, const SweepOptions& o,
                               int64_t gpus) {
  if (gpus > kMaxPlanGpus) return Status::error(fmt::format("more than {} GPUs", kMaxPlanGpus));
  if (w.global_batch > kMaxPlanGlobalBatch) {
    return Status::error(fmt::format("a global batch of more than {} sequences", kMaxPlanGlobalBatch));
  }
  const int n = static_cast<int>(gpus);
  if (o.layout) {
    ParallelLayout l = *o.layout;
    const int mp = l.tp * l.pp * l.cp;
    if (n % mp != 0) {
      return Status::error(fmt::format("tp({}) * pp({}) * cp({}) = {} does not divide {} GPUs", l.tp, l.pp, l.cp, mp, n));
    }
    l.dp = n / mp;
    TERA_RETURN_IF_ERROR(check_layout(l, w, n));
    return evaluate_layout(spec, l, w, cl);
  }
  SearchResult r = search_layouts(spec, w, cl, n, o.space, 1);
  if (r.best.empty()) {
    return Status::error(r.smallest ? fmt::format("no layout fits in memory (smallest needs {:.1f} GiB: {})",
                                                  r.smallest_memory.total() / (1 << 30), layout_string(*r.smallest))
                                    : std::string("no layout is possible (tp, pp, dp and micro-batch must divide "
                                                  "heads, layers, GPUs and the global batch)"));
  }
  return std::move(r.best.front());
}

}  // namespace

Expected<SweepResult> run_sweep(const ModelSpec& spec, const Workload& w, const Cluster& cl, const SweepOptions& o) {
  if (o.gpus.empty()) return Status::error("the sweep has no GPU counts");
  if (o.global_batch < 1) return Status::error("--global-batch must be >= 1");
  SweepResult res;
  const int64_t n0 = o.gpus.front();
  for (int64_t n : o.gpus) {
    Workload wp = w;
    wp.global_batch = o.global_batch;
    if (o.kind == SweepKind::weak) {
      // Same batch per GPU as the first point.
      if (o.global_batch > kMaxPlanGlobalBatch || n / n0 > kMaxPlanGlobalBatch) {
        res.skipped.push_back(fmt::format("{} GPUs: the global batch would exceed {} sequences", n, kMaxPlanGlobalBatch));
        continue;
      }
      if ((o.global_batch * n) % n0 != 0) {
        const std::string why = fmt::format("weak scaling needs global batch {} x {} / {} to be whole", o.global_batch, n, n0);
        if (res.points.empty()) return Status::error(why);
        res.skipped.push_back(fmt::format("{} GPUs: {}", n, why));
        continue;
      }
      wp.global_batch = o.global_batch * n / n0;
    }
    auto e = run_point(spec, wp, cl, o, n);
    if (!e.ok()) {
      if (res.points.empty()) return Status::error(fmt::format("first point ({} GPUs, global batch {}): {}", n,
                                                               wp.global_batch, e.error()));
      res.skipped.push_back(fmt::format("{} GPUs (global batch {}): {}", n, wp.global_batch, e.error()));
      continue;
    }
    SweepPoint p;
    p.gpus = n;
    p.global_batch = wp.global_batch;
    p.eval = std::move(*e);
    const SweepPoint* first = res.points.empty() ? &p : &res.points.front();
    p.efficiency = (p.eval.tokens_per_s / static_cast<double>(n)) /
                   (first->eval.tokens_per_s / static_cast<double>(first->gpus));
    double goodput = 1;
    if (o.failures) {
      p.failure = estimate_failures(*o.failures, n, cl.node.gpus);
      goodput = p.failure->goodput;
    }
    if (o.train_tokens > 0) p.time_to_train_s = o.train_tokens / (p.eval.tokens_per_s * goodput);
    res.points.push_back(std::move(p));
  }
  return res;
}

}  // namespace tera
