// The sweep driver; see sweep_plan.h.
#include "plan/sweep_plan.h"

#include <fmt/format.h>

namespace tera {

namespace {

std::string short_layout_text(const ParallelLayout& l) {
  return fmt::format("tp={} pp={} cp={} vpp={} mb={} zero={} recompute={}", l.tp, l.pp, l.cp, l.vpp, l.micro_batch,
                     l.zero, recompute_name(l.recompute));
}

}  // namespace

Expected<SweepPlan> plan_sweep(const Workload& w, const Cluster& cl, const SweepRequest& r) {
  SweepPlan plan;
  SweepOptions& o = plan.options;
  o.kind = r.kind;
  o.gpus = r.points;
  const int64_t first = r.points.empty() ? r.from : r.points.front();
  int64_t granule = cl.node.gpus;  // the last point of a doubling sweep: whole nodes, or whole replicas
  if (r.layout) {
    o.layout = r.layout;
    granule = static_cast<int64_t>(r.layout->tp) * r.layout->pp * r.layout->cp;
  } else if (!r.replan) {
    // As the study measured weak scaling: one layout, data parallelism grows.
    const ModelSpec spec(w.model);
    if (first > kMaxPlanGpus) return Status::error("--from: more than 2^30 GPUs");
    const SearchResult best = search_layouts(spec, w, cl, static_cast<int>(first), SearchSpace{}, 1);
    if (best.best.empty()) {
      return Status::error(fmt::format("no layout fits {} GPUs at global batch {}; give --layout or a larger --from",
                                       first, w.global_batch));
    }
    o.layout = best.best.front().layout;
    plan.planned_first = true;
    granule = static_cast<int64_t>(o.layout->tp) * o.layout->pp * o.layout->cp;
  }
  if (r.points.empty()) {
    auto p = doubling_points(r.from, r.to, granule);
    if (!p.ok()) return p.status();
    o.gpus = *p;
  }
  if (o.layout && o.layout->dp != o.gpus.front() / (o.layout->tp * o.layout->pp * o.layout->cp)) {
    return Status::error(fmt::format("--layout dp={} does not match the first point: {} GPUs / (tp({}) * pp({})); "
                                     "leave dp out",
                                     o.layout->dp, o.gpus.front(), o.layout->tp, o.layout->pp));
  }
  o.global_batch = w.global_batch;
  return plan;
}

std::vector<std::string> efficiency_notes(const SweepResult& r) {
  std::vector<std::string> notes;
  if (r.points.empty()) return notes;
  const SweepPoint& p0 = r.points.front();
  const ParallelLayout& l0 = p0.eval.layout;
  for (const SweepPoint& p : r.points) {
    if (p.efficiency <= 1.0005) continue;
    const ParallelLayout& l = p.eval.layout;
    const int64_t per0 = p0.global_batch / l0.dp, per = p.global_batch / l.dp;
    std::string why;
    ParallelLayout l_dp = l;
    l_dp.dp = l0.dp;
    if (!(l_dp == l0)) {
      why = fmt::format("a different layout ({} vs {} at the first point)", short_layout_text(l), short_layout_text(l0));
    }
    if (per != per0) {
      why += fmt::format("{}a different batch per replica ({} vs {} sequences)", why.empty() ? "" : "; ", per, per0);
    }
    if (why.empty()) why = "the same layout runs faster per GPU (e.g. collectives over more nodes use more NICs)";
    notes.push_back(fmt::format("{:.1f}% at {} GPUs: {}", 100 * p.efficiency, p.gpus, why));
  }
  return notes;
}

}  // namespace tera
