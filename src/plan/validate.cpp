// `tera plan validate` (validate.h): every row priced, summarised overall
// and by source, the stack profiles' parameters fitted on the rows, and
// leave-one-source-out cross-validation. The row vocabulary is
// published_row.cpp's, the pricing row_pricing.cpp's.
#include "plan/validate.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>

#include "plan/published_row.h"
#include "plan/row_pricing.h"

namespace tera {

const char* metric_name(MetricKind m) {
  switch (m) {
    case MetricKind::tflops_per_gpu: return "tflops_per_gpu";
    case MetricKind::util_pct: return "util_pct";
    case MetricKind::iteration_time_s: return "iteration_time_s";
    case MetricKind::tokens_per_s_per_gpu: return "tokens_per_s_per_gpu";
    case MetricKind::tokens_per_s: return "tokens_per_s";
    case MetricKind::seq_per_s: return "seq_per_s";
  }
  return "?";
}

namespace {

// Fits one profile's parameters on `rows` (indices into cases), each priced
// on the layout `layouts[i]` found with the starting parameters: coordinate
// descent by golden-section search on each parameter in turn, minimising the
// mean |log(predicted / reported)|.
StackParams fit_profile(const std::vector<RowCase>& cases, const std::vector<size_t>& rows,
                        const std::vector<ParallelLayout>& layouts, StackParams start) {
  if (rows.empty()) return start;
  auto loss = [&](const StackParams& q) {
    double sum = 0;
    for (size_t i : rows) {
      const RowPrediction p = price_case(cases[i], q, &layouts[i]);
      sum += std::fabs(std::log(p.predicted / p.reported));
    }
    return sum / static_cast<double>(rows.size());
  };
  if (start.overlap_loss < 0) start.overlap_loss = cases[rows.front()].cl.eff.overlap_loss;
  struct Axis {
    double StackParams::*field;
    double lo, hi;
    bool log;
  };
  const Axis axes[] = {{&StackParams::gemm_scale, 0.5, 1.6, false},
                       {&StackParams::overhead_scale, 0.1, 10, true},
                       {&StackParams::overlap_loss, 0, 1, false},
                       {&StackParams::link_scale, 0.05, 1.4, true},
                       {&StackParams::fp8_rowwise_scale, 0.3, 1, false},
                       {&StackParams::fp8_scale, 0.4, 1.2, false}};
  StackParams best = start;
  double best_loss = loss(best);
  for (int round = 0; round < 2; ++round) {
    for (const Axis& ax : axes) {
      const double phi = 0.5 * (std::sqrt(5.0) - 1);
      auto to = [&](double u) { return ax.log ? std::exp(u) : u; };
      double a = ax.log ? std::log(ax.lo) : ax.lo, b = ax.log ? std::log(ax.hi) : ax.hi;
      auto at = [&](double u) {
        StackParams q = best;
        q.*ax.field = to(u);
        return loss(q);
      };
      double x1 = b - phi * (b - a), x2 = a + phi * (b - a), f1 = at(x1), f2 = at(x2);
      for (int it = 0; it < 14; ++it) {
        if (f1 < f2) {
          b = x2, x2 = x1, f2 = f1, x1 = b - phi * (b - a), f1 = at(x1);
        } else {
          a = x1, x1 = x2, f1 = f2, x2 = a + phi * (b - a), f2 = at(x2);
        }
      }
      const double u = f1 < f2 ? x1 : x2, f = std::min(f1, f2);
      if (f < best_loss) {
        best_loss = f;
        best.*ax.field = to(u);
      }
    }
  }
  return best;
}

// Fits every profile present among `rows`; others keep `base`.
std::map<std::string, StackParams> fit_profiles(const std::vector<RowCase>& cases, const std::vector<size_t>& rows,
                                                const std::vector<ParallelLayout>& layouts,
                                                std::map<std::string, StackParams> base,
                                                const std::vector<std::string>& only = {}) {
  std::map<std::string, std::vector<size_t>> by;
  for (size_t i : rows) by[cases[i].profile.name].push_back(i);
  for (const auto& [name, idx] : by) {
    if (!only.empty() && std::find(only.begin(), only.end(), name) == only.end()) continue;
    auto it = base.find(name);
    base[name] = fit_profile(cases, idx, layouts, it == base.end() ? cases[idx.front()].profile.params : it->second);
  }
  return base;
}

double median_of(std::vector<double> v) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

}  // namespace

double memory_rel_error(const RowPrediction& p) {
  return p.reported_memory_gib > 0 ? p.predicted_memory_gib / p.reported_memory_gib - 1 : 0;
}

void summarise(ValidationReport* rep) {
  std::vector<double> all;
  std::vector<std::string> order;
  std::map<std::string, std::vector<double>> by;
  for (const RowPrediction& p : rep->rows) {
    const double e = std::fabs(p.rel_error);
    all.push_back(e);
    if (!by.count(p.source)) order.push_back(p.source);
    by[p.source].push_back(e);
  }
  rep->median_abs_error = median_of(all);
  rep->max_abs_error = all.empty() ? 0 : *std::max_element(all.begin(), all.end());
  rep->by_source.clear();
  for (const std::string& s : order) {
    const auto& v = by[s];
    rep->by_source.push_back({s, static_cast<int>(v.size()), median_of(v), *std::max_element(v.begin(), v.end())});
  }
  std::map<std::string, std::vector<double>> by_term;
  for (const RowPrediction& p : rep->rows) by_term[dominant_term(p.breakdown)].push_back(std::fabs(p.rel_error));
  std::vector<std::string> terms = {"compute"};
  for (StepTerm t : kAllStepTerms) {
    if (!is_compute(t)) terms.push_back(step_term_key(t));
  }
  rep->by_term.clear();
  for (const std::string& t : terms) {
    const auto it = by_term.find(t);
    if (it == by_term.end()) continue;
    const auto& v = it->second;
    rep->by_term.push_back({t, static_cast<int>(v.size()), median_of(v), *std::max_element(v.begin(), v.end())});
  }
  std::vector<double> mem_err, mem_ratio;
  for (const RowPrediction& p : rep->rows) {
    if (p.reported_memory_gib <= 0) continue;
    mem_ratio.push_back(1 + memory_rel_error(p));
    mem_err.push_back(std::fabs(memory_rel_error(p)));
  }
  rep->memory = MemoryStats{};
  if (!mem_err.empty()) {
    rep->memory = {static_cast<int>(mem_err.size()), median_of(mem_err),
                   *std::max_element(mem_err.begin(), mem_err.end()), median_of(mem_ratio)};
  }
}

namespace {

// A validation that scored no row is a failure, never a median of nothing.
Status nothing_scored(const std::vector<std::string>& wheres, const std::vector<std::string>& skipped) {
  std::string files;
  for (const std::string& w : wheres) files += (files.empty() ? "" : ", ") + w;
  return Status::error(fmt::format("{}: no row could be scored ({} skipped{}{})", files, skipped.size(),
                                   skipped.empty() ? "" : "; the first: ", skipped.empty() ? "" : skipped.front()));
}

}  // namespace

Expected<ValidationReport> validate_runs(const std::vector<CsvTable>& tables, const std::vector<std::string>& wheres,
                                         ClusterLoader load, const ValidateOptions& opt) {
  auto parsed = parse_runs(tables, wheres, load);
  if (!parsed.ok()) return parsed.status();
  const std::vector<RowCase>& cases = parsed->cases;
  ValidationReport rep;
  rep.skipped = parsed->skipped;
  std::map<std::string, StackParams> params = opt.params;
  if (opt.fit) {
    // From neutral parameters (the presets unchanged), so a fit depends on the rows only.
    std::map<std::string, StackParams> neutral;
    for (const RowCase& c : cases) neutral[c.profile.name] = StackParams{};
    std::vector<size_t> all(cases.size());
    for (size_t i = 0; i < all.size(); ++i) all[i] = i;
    params = fit_profiles(cases, all, start_layouts(cases, neutral), neutral);
  }
  for (const RowCase& c : cases) {
    const StackParams q = params_for(params, c);
    if (!params.count(c.profile.name)) params[c.profile.name] = q;
    RowPrediction p = price_case(c, q);
    if (!p.skip_reason.empty()) {
      rep.skipped.push_back("row_id " + p.row_id + ": " + p.skip_reason);
      continue;
    }
    rep.rows.push_back(std::move(p));
  }
  rep.params = params;
  summarise(&rep);
  if (rep.rows.empty()) return nothing_scored(wheres, rep.skipped);
  return rep;
}

Expected<ValidationReport> validate_runs(const CsvTable& table, const std::string& where, ClusterLoader load) {
  return validate_runs(std::vector<CsvTable>{table}, std::vector<std::string>{where}, load);
}

Expected<CrossValidation> cross_validate_by_source(const std::vector<CsvTable>& tables,
                                                   const std::vector<std::string>& wheres, ClusterLoader load) {
  auto parsed = parse_runs(tables, wheres, load);
  if (!parsed.ok()) return parsed.status();
  const std::vector<RowCase>& cases = parsed->cases;
  ValidateOptions fit;
  fit.fit = true;
  CrossValidation cv;
  auto in = validate_runs(tables, wheres, load, fit);
  if (!in.ok()) return in.status();
  cv.in_sample = std::move(*in);
  std::map<std::string, StackParams> neutral;
  for (const RowCase& c : cases) neutral[c.profile.name] = StackParams{};
  const std::vector<ParallelLayout> layouts = start_layouts(cases, neutral);  // as the in-sample fit started
  std::vector<std::string> sources;
  for (const RowCase& c : cases) {
    if (std::find(sources.begin(), sources.end(), c.p.source) == sources.end()) sources.push_back(c.p.source);
  }
  cv.held_out.skipped = parsed->skipped;
  std::vector<RowPrediction> held(cases.size());
  std::vector<bool> priced(cases.size(), false);
  for (const std::string& src : sources) {
    std::vector<size_t> train;
    std::vector<std::string> touched;  // profiles of the held-out source: only their fits change
    for (size_t i = 0; i < cases.size(); ++i) {
      if (cases[i].p.source != src) train.push_back(i);
      else if (std::find(touched.begin(), touched.end(), cases[i].profile.name) == touched.end()) {
        touched.push_back(cases[i].profile.name);
      }
    }
    // The held-out source's profiles are refitted from neutral parameters
    // (the preset unchanged) on the other sources' rows; one that no other
    // source ran takes its family's fit below, or keeps them.
    std::map<std::string, StackParams> base = cv.in_sample.params;
    for (const std::string& t : touched) base[t] = StackParams{};
    auto params = fit_profiles(cases, train, layouts, base, touched);
    // A held-out profile no other source ran: one fit over the rows of the
    // other profiles of its family (each row priced with its own profile's
    // stack), the closest evidence of what its engine costs.
    for (const std::string& t : touched) {
      std::vector<size_t> family;
      bool own = false;
      for (size_t i : train) {
        own = own || cases[i].profile.name == t;
        if (profile_family(cases[i].profile.name) == profile_family(t)) family.push_back(i);
      }
      if (own) continue;
      if (!family.empty()) params[t] = fit_profile(cases, family, layouts, StackParams{});
      cv.lone_profiles.push_back({src, t, profile_family(t), family.size()});
    }
    for (size_t i = 0; i < cases.size(); ++i) {
      if (cases[i].p.source != src) continue;
      held[i] = price_case(cases[i], params_for(params, cases[i]));
      priced[i] = true;
    }
  }
  for (size_t i = 0; i < cases.size(); ++i) {
    if (!priced[i]) continue;
    if (!held[i].skip_reason.empty()) {
      cv.held_out.skipped.push_back("row_id " + held[i].row_id + ": " + held[i].skip_reason);
    } else {
      cv.held_out.rows.push_back(std::move(held[i]));
    }
  }
  summarise(&cv.held_out);
  if (cv.held_out.rows.empty()) return nothing_scored(wheres, cv.held_out.skipped);
  return cv;
}

}  // namespace tera
