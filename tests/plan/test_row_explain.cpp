// `tera plan validate --explain ROW` and the misses grouped by dominant term:
// the step breakdown adds up to the predicted step on the published rows,
// the explanation prices a row exactly as validate does, the row selection
// names the valid rows, and the grouping is checked on a hand-built case.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <cmath>
#include <fstream>
#include <sstream>

#include "plan/presets.h"
#include "plan/report.h"
#include "plan/row_explain.h"
#include "plan/row_pricing.h"

namespace tera {
namespace {

// Both calibration files of this tree's configs/ (presets.h config_dir()).
struct Files {
  std::vector<CsvTable> tables;
  std::vector<std::string> wheres;
};

Files calibration_files(const std::vector<std::string>& names) {
  Files f;
  for (const std::string& n : names) {
    const std::string path = config_dir() + "/calibration/" + n;
    std::ifstream in(path);
    std::stringstream ss;
    ss << in.rdbuf();
    auto t = parse_csv(ss.str(), path);
    EXPECT_TRUE(t.ok()) << path << ": " << (t.ok() ? "" : t.error());
    if (!t.ok()) continue;
    f.tables.push_back(std::move(*t));
    f.wheres.push_back(path);
  }
  return f;
}

const std::vector<std::string> kBoth = {"published_runs.csv", "published_runs_more.csv"};

// The terms are the critical stage's timeline regrouped (recompute taken out
// of the three compute classes, the overhead the remainder of the stage's
// end), so they add up to the step to the rounding of a dozen additions:
// 1e-12 of the step is a thousand times that.
TEST(StepBreakdown, TermsAddUpToThePredictedStepOnBothFiles) {
  const Files f = calibration_files(kBoth);
  ASSERT_EQ(f.tables.size(), 2u);
  auto rep = validate_runs(f.tables, f.wheres, &load_cluster);
  ASSERT_TRUE(rep.ok()) << rep.error();
  ASSERT_GE(rep->rows.size(), 90u);
  int with_recompute = 0, from_more = 0;
  for (const RowPrediction& p : rep->rows) {
    const StepBreakdown& b = p.breakdown;
    ASSERT_GT(b.step_time, 0) << "row " << p.row_id;
    EXPECT_NEAR(b.total(), b.step_time, 1e-12 * b.step_time) << "row " << p.row_id;
    for (StepTerm t : kAllStepTerms) EXPECT_GE(b[t], -1e-12 * b.step_time) << "row " << p.row_id << " " << step_term_key(t);
    if (p.layout.recompute == Recompute::none) {
      EXPECT_EQ(b[StepTerm::recompute], 0) << "row " << p.row_id;
    }
    if (p.layout.recompute == Recompute::full) {
      EXPECT_GT(b[StepTerm::recompute], 0) << "row " << p.row_id;
      ++with_recompute;
    }
    if (std::stoi(p.row_id) >= 200) ++from_more;
  }
  EXPECT_GT(with_recompute, 10);
  EXPECT_GT(from_more, 40);
}

// --explain prices the row as validate does: the same layout, the same
// figure to the last bit, and the reported figure's step time maps back.
TEST(RowExplain, PredictionEqualsValidatesForTheSameRow) {
  const Files f = calibration_files(kBoth);
  ASSERT_EQ(f.tables.size(), 2u);
  auto rep = validate_runs(f.tables, f.wheres, &load_cluster);
  ASSERT_TRUE(rep.ok()) << rep.error();
  auto rows = explain_rows(f.tables, f.wheres, &load_cluster, {}, "1,5-7,12,17,35,70,201,209,222,230,235,248");
  ASSERT_TRUE(rows.ok()) << rows.error();
  ASSERT_EQ(rows->size(), 14u);
  for (const RowExplanation& x : *rows) {
    const RowPrediction* v = nullptr;
    for (const RowPrediction& p : rep->rows) {
      if (p.row_id == x.p.row_id) v = &p;
    }
    ASSERT_NE(v, nullptr) << x.p.row_id;
    EXPECT_EQ(x.p.predicted, v->predicted) << "row " << x.p.row_id;
    EXPECT_EQ(x.p.rel_error, v->rel_error) << "row " << x.p.row_id;
    EXPECT_EQ(layout_string(x.p.layout), layout_string(v->layout)) << "row " << x.p.row_id;
    EXPECT_EQ(x.e.step_time_s, x.p.breakdown.step_time);
    // The overhead term is a remainder: it is the simulator's per-step
    // overhead only if the named terms account for everything else.
    EXPECT_NEAR(x.p.breakdown[StepTerm::overhead], x.cl.eff.step_overhead, 1e-12 * x.e.step_time_s);
    EXPECT_EQ(metric_for_step(x.c, x.e.step_time_s), x.p.predicted);
    // The inverse: the reported step time read back is the reported figure.
    EXPECT_NEAR(metric_for_step(x.c, x.reported_step_s), x.p.reported, 1e-12 * x.p.reported);
    const std::string text = row_explanation_text(x);
    EXPECT_NE(text.find(fmt::format("predicted {:.3f}, reported {:.3f}", v->predicted, v->reported)), std::string::npos)
        << text;
  }
}

// A term's factor makes the step the target: rest + factor * own == target.
TEST(StepBreakdown, FactorToMatchMeetsTheTarget) {
  StepBreakdown b;
  b.step_time = 10;
  b.seconds[static_cast<size_t>(StepTerm::gemm)] = 6;
  b.seconds[static_cast<size_t>(StepTerm::bubble)] = 4;
  EXPECT_DOUBLE_EQ(factor_to_match(b, StepTerm::gemm, 13), 1.5);    // 4 + 6 * 1.5 = 13
  EXPECT_DOUBLE_EQ(factor_to_match(b, StepTerm::bubble, 8), 0.5);   // 6 + 4 * 0.5 = 8
  EXPECT_LT(factor_to_match(b, StepTerm::bubble, 5), 0);            // below the other terms alone
  EXPECT_LT(factor_to_match(b, StepTerm::tp_comm, 12), 0);          // a zero term cannot grow
}

StepBreakdown hand_case(double gemm, StepTerm other, double seconds) {
  StepBreakdown b;
  b.seconds[static_cast<size_t>(StepTerm::gemm)] = gemm;
  b.seconds[static_cast<size_t>(other)] = seconds;
  b.step_time = b.total();
  return b;
}

// Worked by hand: the largest non-compute term at >= 5% of the step names
// the group; below 5% the step is compute-bound.
TEST(StepBreakdown, DominantTermAndTheGroupingByIt) {
  StepBreakdown b = hand_case(6, StepTerm::bubble, 1);  // bubble 1/7 = 14%
  b.seconds[static_cast<size_t>(StepTerm::tp_comm)] = 2;  // tp 2/9: the largest
  b.step_time = b.total();
  EXPECT_STREQ(dominant_term(b), "tp_comm");
  EXPECT_STREQ(dominant_term(hand_case(96, StepTerm::optimizer, 4)), "compute");     // 3.8%: below 5%
  EXPECT_STREQ(dominant_term(hand_case(95, StepTerm::optimizer, 5)), "optimizer");   // exactly 5%
  EXPECT_STREQ(dominant_term(hand_case(70, StepTerm::recompute, 30)), "recompute");
  ValidationReport rep;
  auto row = [&](const StepBreakdown& x, double err) {
    RowPrediction p;
    p.source = "s";
    p.breakdown = x;
    p.rel_error = err;
    rep.rows.push_back(p);
  };
  row(b, 0.10);                                      // tp_comm
  row(hand_case(9, StepTerm::tp_comm, 1), -0.30);    // tp_comm
  row(hand_case(8, StepTerm::tp_comm, 1), 0.20);     // tp_comm
  row(hand_case(99, StepTerm::bubble, 1), 0.04);     // compute
  row(hand_case(50, StepTerm::bubble, 50), -0.02);   // pp_bubble
  summarise(&rep);
  ASSERT_EQ(rep.by_term.size(), 3u);
  EXPECT_EQ(rep.by_term[0].term, "compute");
  EXPECT_EQ(rep.by_term[0].rows, 1);
  EXPECT_EQ(rep.by_term[1].term, "tp_comm");
  EXPECT_EQ(rep.by_term[1].rows, 3);
  EXPECT_DOUBLE_EQ(rep.by_term[1].median_abs_error, 0.20);
  EXPECT_DOUBLE_EQ(rep.by_term[1].max_abs_error, 0.30);
  EXPECT_EQ(rep.by_term[2].term, "pp_bubble");
  EXPECT_DOUBLE_EQ(rep.by_term[2].max_abs_error, 0.02);
  const std::string t = term_table(rep);
  EXPECT_NE(t.find("tp_comm                 3    20.00%    30.00%"), std::string::npos) << t;
}

TEST(RowExplain, SelectionNamesTheValidRows) {
  const std::vector<std::string> ids = {"1", "2", "3", "4", "70", "71", "201"};
  auto one = select_rows("3", ids);
  ASSERT_TRUE(one.ok());
  EXPECT_EQ(*one, (std::vector<std::string>{"3"}));
  auto list = select_rows("201,2-4,70-100", ids);
  ASSERT_TRUE(list.ok()) << list.error();
  EXPECT_EQ(*list, (std::vector<std::string>{"201", "2", "3", "4", "70", "71"}));
  for (const char* bad : {"x", "", "3,", "-1", "4-2", "5", "1000", "12-"}) {
    auto r = select_rows(bad, ids);
    ASSERT_FALSE(r.ok()) << bad;
    EXPECT_NE(r.error().find("the rows priced are 1-4, 70-71, 201"), std::string::npos) << r.error();
  }
}

}  // namespace
}  // namespace tera
