// Tensor-parallel step benchmark, run under mpirun with P ranks (layout
// tp = P, dp = 1, one OpenMP thread per rank unless OMP_NUM_THREADS says
// otherwise). Trains a synthetic-data GPT for a few steps and prints one JSON
// line from the first rank: median step time, tokens/s, the tensor-parallel
// communication share of the step (time blocked in the tp group's
// collectives / step time), and the bytes the tp group sent per step,
// measured by the communicator and from the closed form
// (ModelSpec::tp_bytes_per_micro_batch + the sequence-parallel LayerNorm
// gradient all-reduce + the 8-byte norm all-reduce).
#include <omp.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <fmt/format.h>
#include <nlohmann/json.hpp>
#include <vector>

#include "comm/groups.h"
#include "comm/world.h"
#include "step_bench.h"
#include "train/engine.h"

using namespace tera;

int main(int argc, char** argv) {
  CLI::App app{"tera tensor-parallel step benchmark (run under mpirun; tp = number of ranks)"};
  bench::StepModel m{.layers = 6, .hidden = 384, .heads = 6, .seq = 128, .batch = 8, .steps = 8};
  bool sp = false;
  m.add_options(app);
  app.add_flag("--sp", sp, "sequence parallelism");
  CLI11_PARSE(app, argc, argv);

  auto world = CommWorld::init();
  Communicator& comm = world->world();
  if (std::getenv("OMP_NUM_THREADS") == nullptr) omp_set_num_threads(1);
  RunConfig cfg = m.config();
  cfg.parallel.tp = comm.size();
  cfg.parallel.sequence_parallel = sp;
  const int64_t layers = m.layers, seq = m.seq, batch = m.batch;
  ProcessGroups groups(comm, cfg.parallel);
  Engine engine(cfg, cpu_backend(), groups.groups());
  engine.init_parameters(1);
  const bench::StepTimes times =
      bench::timed_steps(engine, groups, *groups.groups().tp, m.steps, cfg.train.lr, bench::synthetic_tokens(seq));
  const int64_t bytes = times.group_bytes;
  int64_t formula = engine.spec().tp_bytes_per_micro_batch(batch, seq, engine.activation_options(), layers, true, true);
  const int p = comm.size();
  if (p > 1) {
    if (sp) {
      for (const auto& u : engine.table().units()) formula += 2 * (p - 1) * (u.sp_partial_end - u.begin) * 4 / p;
    }
    formula += 2 * (p - 1) * 8 / p;
  }
  if (comm.rank() == 0) {
    const double med = times.median_ms;
    nlohmann::json j = {{"tp", p},
                        {"sp", sp},
                        {"params", engine.spec().num_params()},
                        {"step_ms", med},
                        {"tokens_per_s", static_cast<double>(batch * seq) / (med / 1e3)},
                        {"tp_comm_share", times.median_wait_share},
                        {"tp_bytes_measured", bytes},
                        {"tp_bytes_formula", formula},
                        {"activations_bytes_per_rank", engine.memory()[MemoryClass::activations]}};
    fmt::print("{}\n", j.dump());
  }
  return 0;
}
