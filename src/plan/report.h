// What the planner prints: the ranked table, the JSON objects, the breakdown
// of one layout's step (--explain) and the validation table. Pure text and
// JSON from Evaluation / ValidationReport; cli/cmd_plan.cpp decides where it goes.
#pragma once

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "plan/search.h"
#include "plan/validate.h"

namespace tera {

nlohmann::json evaluation_json(const Evaluation& e);
// Ranked table (rank, layout, memory, step time, tokens/s, TFLOP/s, MFU,
// bubble) followed by each row's memory breakdown.
std::string evaluations_table(const std::vector<Evaluation>& best, const Cluster& cl);
// One layout's step, by where the time goes on its critical stage; the
// parts add up to the step time.
std::string explain_text(const Evaluation& e, const Workload& w, const Cluster& cl, const Schedule& sch);
std::string memory_text(const MemoryBreakdown& m, const Cluster& cl);

std::string validation_table(const ValidationReport& rep);
nlohmann::json validation_json(const ValidationReport& rep);
// Cross-validation's lone profiles: [{source, profile, family, family_rows}].
nlohmann::json lone_profiles_json(const CrossValidation& cv);
// Per-source in-sample and held-out median/max, then the held-out rows.
std::string cross_validation_table(const CrossValidation& cv);
// Median and max per dominant term of the predicted step (the misses grouped by what dominates them).
std::string term_table(const ValidationReport& rep);
// The rows that report their peak memory: predicted beside reported, and the
// median and max |error| ("" when no row reports one).
std::string memory_table(const ValidationReport& rep);
// Median and max per source; profile parameters.
std::string source_table(const ValidationReport& rep);
std::string params_table(const std::map<std::string, StackParams>& params);

}  // namespace tera
