// Context-parallel step benchmark, run under mpirun with P ranks (layout
// cp = P, tp = pp = dp = 1, one OpenMP thread per rank unless
// OMP_NUM_THREADS says otherwise). Trains a synthetic-data GPT with long
// sequences for a few steps and prints one JSON line from the first rank:
// the activation and workspace bytes per rank from the memory plan (what
// `tera plan` and the memory check count, train/memory_check.h) beside what
// the backend allocated (the engine's arenas), the median step time,
// tokens/s, and the share of the step blocked in the ring's transfers.
// Compare cp = 1, 2, 4 side by side: `mpirun -n P cp_bench --seq 4096`.
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
#include "train/memory_check.h"

using namespace tera;

int main(int argc, char** argv) {
  CLI::App app{"tera context-parallel step benchmark (run under mpirun; cp = number of ranks)"};
  bench::StepModel m{.layers = 2, .hidden = 128, .heads = 4, .seq = 4096, .batch = 1, .steps = 4};
  m.add_options(app, "sequence length (a multiple of 2 x ranks)");
  CLI11_PARSE(app, argc, argv);

  auto world = CommWorld::init();
  Communicator& comm = world->world();
  if (std::getenv("OMP_NUM_THREADS") == nullptr) omp_set_num_threads(1);
  RunConfig cfg = m.config();
  cfg.parallel.cp = comm.size();
  const int64_t seq = m.seq, batch = m.batch;
  if (!ContextSplit::divides(seq, comm.size())) {
    if (comm.rank() == 0) fmt::print(stderr, "cp_bench: {}\n", ContextSplit::check(seq, comm.size()));
    return 2;
  }
  ProcessGroups groups(comm, cfg.parallel);
  const MemoryReport planned = estimate_rank_memory(cfg, groups.groups().layout, groups.groups().coord);
  Engine engine(cfg, cpu_backend(), groups.groups());
  engine.init_parameters(1);
  const bench::StepTimes times =
      bench::timed_steps(engine, groups, *groups.groups().cp, m.steps, cfg.train.lr, bench::synthetic_tokens(seq));
  const MemoryReport got = engine.memory();
  if (comm.rank() == 0) {
    const double med = times.median_ms;
    nlohmann::json j = {{"cp", comm.size()},
                        {"seq", seq},
                        {"params", engine.spec().num_params()},
                        {"activations_bytes_plan", planned[MemoryClass::activations]},
                        {"activations_bytes_allocated", got[MemoryClass::activations]},
                        {"workspace_bytes_plan", planned[MemoryClass::workspace]},
                        {"workspace_bytes_allocated", got[MemoryClass::workspace]},
                        {"step_ms", med},
                        {"tokens_per_s", static_cast<double>(batch * seq) / (med / 1e3)},
                        {"cp_wait_share", times.median_wait_share}};
    fmt::print("{}\n", j.dump());
  }
  return 0;
}
