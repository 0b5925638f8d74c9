// `tera plan validate FILE --explain ROW`: one published run's prediction
// taken apart. The row is priced exactly as validate prices it (same
// parameters, same search, so the same figure); its step is broken down by
// term (step_breakdown.h) and set beside what the reported figure implies:
// the step time it means, the model FLOP utilisation the run reached, and by
// how much each term alone would have to change to meet it.
#pragma once

#include <string>
#include <vector>

#include "plan/published_row.h"
#include "plan/step_breakdown.h"

namespace tera {

struct RowExplanation {
  RowCase c;               // the row as read (workload, preset, profile)
  Cluster cl;              // the preset with the profile's parameters applied
  StackParams params;      // those parameters
  RowPrediction p;         // what validate prints for the row
  Evaluation e;            // the priced layout's evaluation
  double reported_step_s = 0;  // the step time the reported figure implies
};

// The row ids a selection names: "12", "5-8", "3,7,201-203", in the order
// given. A token that is not a row number, a range the wrong way round, or a
// row not among `ids` (the rows validate prices) fails with a message that
// lists the valid rows.
Expected<std::vector<std::string>> select_rows(const std::string& spec, const std::vector<std::string>& ids);

// Explains the rows `spec` selects (select_rows) of the tables, priced with
// the parameters validate_runs would use under `opt` (with opt.fit, fitted
// on every row first). A row validate skips fails with its reason.
Expected<std::vector<RowExplanation>> explain_rows(const std::vector<CsvTable>& tables,
                                                   const std::vector<std::string>& wheres, ClusterLoader load,
                                                   const ValidateOptions& opt, const std::string& spec);

std::string row_explanation_text(const RowExplanation& x);

}  // namespace tera
