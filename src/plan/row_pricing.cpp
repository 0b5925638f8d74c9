// Pricing a published run (row_pricing.h).
#include "plan/row_pricing.h"

namespace tera {

namespace {

// The FLOPs of one step in the row's convention.
double step_flops(const RowCase& c) { return c.p.convention == FlopConvention::model ? c.f_model : c.f_eq3; }

}  // namespace

double metric_for_step(const RowCase& c, double step_time_s) {
  const double tflops = step_flops(c) / step_time_s / c.p.gpus / 1e12;
  const double tokens_per_s = c.tokens / step_time_s;
  switch (c.p.metric) {
    case MetricKind::tflops_per_gpu: return tflops;
    case MetricKind::util_pct: return 100 * tflops / c.peak;
    case MetricKind::iteration_time_s: return step_time_s;
    case MetricKind::tokens_per_s_per_gpu: return tokens_per_s / c.p.gpus;
    case MetricKind::tokens_per_s: return tokens_per_s;
    case MetricKind::seq_per_s: return static_cast<double>(c.gb) / step_time_s;
  }
  return 0;
}

double step_for_metric(const RowCase& c, double value) {
  switch (c.p.metric) {
    case MetricKind::tflops_per_gpu: return step_flops(c) / (value * 1e12 * c.p.gpus);
    case MetricKind::util_pct: return step_flops(c) / (value / 100 * c.peak * 1e12 * c.p.gpus);
    case MetricKind::iteration_time_s: return value;
    case MetricKind::tokens_per_s_per_gpu: return c.tokens / (value * c.p.gpus);
    case MetricKind::tokens_per_s: return c.tokens / value;
    case MetricKind::seq_per_s: return static_cast<double>(c.gb) / value;
  }
  return 0;
}

RowPrediction price_case(const RowCase& c, const StackParams& params, const ParallelLayout* layout, Evaluation* eval) {
  RowPrediction p = c.p;
  StackProfile prof = c.profile;
  prof.params = params;
  const Cluster cl = apply_profile(c.cl, prof);
  const ModelSpec spec(c.w.model);
  const Workload& w = c.w;
  const SearchSpace& space = c.space;
  Evaluation e;
  if (layout) {
    e = evaluate_layout(spec, *layout, w, cl);
  } else if (c.complete) {
    e = evaluate_layout(spec, c.fixed, w, cl);
  } else {
    SearchResult sr = search_layouts(spec, w, cl, p.gpus, space, 1);
    if (!sr.best.empty()) {
      e = sr.best.front();
    } else if (sr.smallest) {  // the run happened; price the least demanding completion
      e = evaluate_layout(spec, *sr.smallest, w, cl);
    } else {
      // Say which of the row's own settings rules everything out.
      ParallelLayout given;
      given.tp = space.tp.value_or(1);
      given.pp = space.pp.value_or(1);
      given.cp = space.cp.value_or(1);
      given.dp = space.dp.value_or(p.gpus / (given.tp * given.pp * given.cp));
      given.micro_batch = space.micro_batch.value_or(1);
      given.vpp = space.vpp.value_or(1);
      given.schedule = given.vpp > 1 ? ScheduleKind::interleaved : ScheduleKind::one_f_one_b;
      const Status why = check_layout(given, w, p.gpus);
      p.skip_reason = "no layout matches the row's tp/pp/dp/micro_batch/vpp: " +
                      (why ? std::string("tp must divide the GPUs of a node") : why.message());
      return p;
    }
  }
  p.layout = e.layout;
  p.fits = e.fits;
  p.predicted_memory_gib = e.memory.total() / kGiB;
  if (!e.fits) p.flags.push_back("over memory per the model");
  p.predicted = metric_for_step(c, e.step_time_s);
  p.rel_error = (p.predicted - p.reported) / p.reported;
  p.breakdown = step_breakdown(e.sim);
  if (eval) *eval = std::move(e);
  return p;
}

StackParams params_for(const std::map<std::string, StackParams>& m, const RowCase& c) {
  auto it = m.find(c.profile.name);
  return it == m.end() ? c.profile.params : it->second;
}

std::vector<ParallelLayout> start_layouts(const std::vector<RowCase>& cases, const std::map<std::string, StackParams>& m) {
  std::vector<ParallelLayout> out;
  for (const RowCase& c : cases) out.push_back(price_case(c, params_for(m, c)).layout);
  return out;
}

}  // namespace tera
