// `tera plan validate`: predicts published training runs (rows in the schema
// of shared/calibration/published_runs.csv) and compares with what each
// source reports, in the row's own metric convention. A row's hardware picks
// the cluster preset (A100 -> selene, H100 -> dgx-h100, H200 -> dgx-h200,
// MI250X -> frontier); settings the row leaves empty are the planner's best
// choice (search over the missing ones) and are flagged.
#pragma once

#include <map>
#include <string>
#include <vector>

#include "plan/csv.h"
#include "plan/search.h"
#include "plan/stack_profile.h"
#include "plan/step_breakdown.h"

namespace tera {

// In order of preference when a row reports several.
enum class MetricKind { tflops_per_gpu, util_pct, iteration_time_s, tokens_per_s_per_gpu, tokens_per_s, seq_per_s };
const char* metric_name(MetricKind m);

// How a source counts FLOPs: model FLOPs (MFU; no recompute) or Megatron's
// eq. 3 hardware convention (96 B s l h^2 (1 + s/6h + V/16lh): the recomputed
// forward counted, whether or not the run recomputed).
enum class FlopConvention { model, megatron_eq3 };

struct RowPrediction {
  std::string row_id;
  std::string source;      // the row's source column (the unit of cross-validation)
  std::string profile;     // stack profile its framework column names
  std::string model;       // the row's model name
  std::string cluster;     // preset used
  int gpus = 0;
  MetricKind metric = MetricKind::tflops_per_gpu;
  FlopConvention convention = FlopConvention::model;
  double predicted = 0;
  double reported = 0;
  double rel_error = 0;    // (predicted - reported) / reported
  ParallelLayout layout;           // the layout priced
  bool fits = true;        // per the memory model
  // Memory per GPU on the fullest stage (the model's, with its allowances), and
  // the run's reported peak (column reported_peak_memory_gib; 0: not reported).
  double predicted_memory_gib = 0;
  double reported_memory_gib = 0;
  std::vector<std::string> flags;  // settings chosen by the planner or inferred
  std::string skip_reason;         // set when the row cannot be priced (no preset, unmodelled feature)
  StepBreakdown breakdown;         // the predicted step by term (step_breakdown.h)
};

// The row's predicted memory relative to its reported peak: predicted /
// reported - 1 (0 when the row reports none).
double memory_rel_error(const RowPrediction& p);

// Memory per GPU against the rows that report their peak.
struct MemoryStats {
  int rows = 0;
  double median_abs_error = 0, max_abs_error = 0;
  double median_ratio = 0;  // predicted / reported
};

struct SourceStats {
  std::string source;
  int rows = 0;
  double median_abs_error = 0, max_abs_error = 0;
};

// The rows whose step a term dominates (dominant_term, step_breakdown.h).
struct TermStats {
  std::string term;
  int rows = 0;
  double median_abs_error = 0, max_abs_error = 0;
};

struct ValidationReport {
  std::vector<RowPrediction> rows;
  std::vector<std::string> skipped;  // "row_id N: why": rows not priced (not in the error statistics)
  double median_abs_error = 0;
  double max_abs_error = 0;
  std::vector<SourceStats> by_source;       // in order of first appearance
  std::vector<TermStats> by_term;           // "compute", then the other terms in StepTerm order
  MemoryStats memory;                       // rows with reported_peak_memory_gib
  std::map<std::string, StackParams> params;  // the profile parameters used
};

// Median and max |rel_error| overall, per source and per dominant term.
void summarise(ValidationReport* rep);

struct ValidateOptions {
  // Fit every profile's parameters (stack_profile.h) on the rows first
  // from neutral parameters (minimising the mean |log(predicted / reported)|
  // of its rows; `params` is then ignored).
  bool fit = false;
  std::map<std::string, StackParams> params;  // profile -> parameters; missing: the profile's defaults
};

// `load` maps a preset name to a cluster (the CLI passes load_cluster). Only a
// file that is not the schema at all (a required column missing) fails the
// run. Every row that cannot be priced is listed in `skipped` with its row id
// and the reason, and the rest are predicted: a malformed value (text where a
// number belongs, e.g. "6 or 12"; the message names the column), a missing
// outcome, no preset for its hardware, a layout inconsistent with its own
// model or batch. Several files are validated together (rows keep their file
// in messages).
using ClusterLoader = Expected<Cluster> (*)(const std::string&);
Expected<ValidationReport> validate_runs(const std::vector<CsvTable>& tables, const std::vector<std::string>& wheres,
                                         ClusterLoader load, const ValidateOptions& opt = {});
Expected<ValidationReport> validate_runs(const CsvTable& table, const std::string& where, ClusterLoader load);

// Leave-one-source-out cross-validation: the profile parameters are fitted on
// every source but one and the rows of that source predicted with them, for
// each source in turn (`held_out`); `in_sample` is the fit on all rows.
struct CrossValidation {
  ValidationReport in_sample, held_out;
  // Each held-out profile that no other source ran: priced with one fit on
  // `family_rows` rows of its family (stack_profile.h profile_family), or
  // with neutral parameters when that is 0.
  struct LoneProfile {
    std::string source, profile, family;
    size_t family_rows = 0;
  };
  std::vector<LoneProfile> lone_profiles;
};
Expected<CrossValidation> cross_validate_by_source(const std::vector<CsvTable>& tables,
                                                   const std::vector<std::string>& wheres, ClusterLoader load);

}  // namespace tera
