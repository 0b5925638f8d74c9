// Pricing a published run (published_row.h) under stack-profile parameters:
// the layout the row fixes, or the planner's best completion of it, run
// through the cost model and read out in the row's own metric and FLOP
// convention.
#pragma once

#include <map>
#include <string>
#include <vector>

#include "plan/published_row.h"

namespace tera {

// Prices a row under profile parameters; `layout`, when set, is priced
// instead of searching (fits keep the layout found at the start). With
// `eval` set, the evaluation the prediction was read from is stored there.
RowPrediction price_case(const RowCase& c, const StackParams& params, const ParallelLayout* layout = nullptr,
                         Evaluation* eval = nullptr);
// The row's metric for a step of `step_time_s` seconds (what price_case
// reports), and its inverse: the step time a value of the metric implies.
double metric_for_step(const RowCase& c, double step_time_s);
double step_for_metric(const RowCase& c, double value);
// The parameters of the row's profile in `m`, else the profile's defaults.
StackParams params_for(const std::map<std::string, StackParams>& m, const RowCase& c);
// The layouts each row is priced on with parameters `m` (searched when the row leaves settings open).
std::vector<ParallelLayout> start_layouts(const std::vector<RowCase>& cases, const std::map<std::string, StackParams>& m);

}  // namespace tera
