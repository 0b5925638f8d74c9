// The published-runs row vocabulary (shared/calibration/README.md): a row of
// published_runs.csv read into what the planner prices (workload, cluster
// preset, stack profile, layout constraints, the reported outcome and its
// FLOP convention). Column vocabulary: precision "fp16"/"bf16"/"mixed"/"fp32"
// (16-bit rows run their stack's mixed precision: every activation in 16
// bits); zero_fsdp_distopt "none (DDP-impl local)" (a reduction that waits for
// backward), "ZeRO-k", "FSDP", "distributed optimizer"; activation_recompute
// "full"/"selective"/"none"; util_metric naming MFU, or Megatron's
// hardware-FLOP convention ("% of peak", "HFU", "incl. recompute", "same FLOP
// convention as Table 1").
#pragma once

#include <string>
#include <vector>

#include "plan/validate.h"

namespace tera {

// A row read and checked, ready to price under any profile parameters.
struct RowCase {
  RowPrediction p;  // row id, source, metric, reported, flags
  Workload w;
  Cluster cl;       // the preset, before the profile
  StackProfile profile;
  SearchSpace space;
  bool complete = false;
  ParallelLayout fixed;  // when complete
  double f_model = 0, f_eq3 = 0, peak = 0, tokens = 0;
  int64_t gb = 0;
};

struct ParsedRuns {
  std::vector<RowCase> cases;
  std::vector<std::string> skipped;
};
// Every row of the tables read; a row that cannot be priced goes to
// `skipped` with its file, line, row id and reason. Fails only when a file
// lacks a required column.
Expected<ParsedRuns> parse_runs(const std::vector<CsvTable>& tables, const std::vector<std::string>& wheres,
                                ClusterLoader load);

}  // namespace tera
