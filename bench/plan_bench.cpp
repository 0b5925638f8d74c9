// Planner search speed: the issue-8 case (frontier-1t on 3,072 GPUs of the
// frontier preset) and others, each searched --repeats times; prints the
// median wall time and how many layouts were enumerated, priced and simulated.
// No floor is enforced; the figure is for the record (issue 8: < 2 s).
#include <CLI/CLI.hpp>
#include <fmt/format.h>

#include <algorithm>
#include <vector>

#include "core/timer.h"
#include "plan/presets.h"
#include "plan/search.h"

int main(int argc, char** argv) {
  using namespace tera;
  CLI::App app{"tera planner search benchmark"};
  int repeats = 5;
  app.add_option("--repeats", repeats, "Searches per case")->check(CLI::PositiveNumber);
  CLI11_PARSE(app, argc, argv);
  struct Case {
    const char *model, *cluster;
    int gpus;
    int64_t global_batch;
  };
  const std::vector<Case> cases = {{"frontier-1t", "frontier", 3072, 3072},
                                   {"frontier-1t", "selene", 3072, 3072},
                                   {"gpt3-175b", "dgx-h100", 1024, 1536},
                                   {"frontier-175b", "frontier", 1024, 1024}};
  fmt::print("{:<14} {:<9} {:>5} {:>6}  {:>10} {:>8} {:>9}  {:>9}  best\n", "model", "cluster", "gpus", "batch",
             "enumerated", "priced", "simulated", "median(s)");
  for (const Case& c : cases) {
    auto model = load_model(c.model);
    auto cluster = load_cluster(c.cluster);
    if (!model.ok() || !cluster.ok()) {
      fmt::print(stderr, "{}\n", model.ok() ? cluster.error() : model.error());
      return 2;
    }
    const ModelSpec spec(*model);
    const Workload w{*model, c.global_batch, Precision::bf16};
    std::vector<double> times;
    SearchResult r;
    for (int i = 0; i < repeats; ++i) {
      Stopwatch t;
      r = search_layouts(spec, w, *cluster, c.gpus, SearchSpace{}, 10);
      times.push_back(t.seconds());
    }
    std::sort(times.begin(), times.end());
    fmt::print("{:<14} {:<9} {:>5} {:>6}  {:>10} {:>8} {:>9}  {:>9.3f}  {}\n", c.model, c.cluster, c.gpus,
               c.global_batch, r.enumerated, r.fitting, r.simulated, times[times.size() / 2],
               r.best.empty() ? "(none fits)" : layout_string(r.best.front().layout));
  }
  return 0;
}
