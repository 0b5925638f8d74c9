// Pipeline benchmark, run under mpirun with P ranks (layout pp = P), or with
// --in-process P as P threads of one process (a machine without MPI, such as
// the GPU node of scripts/device-check), each rank with --threads OpenMP
// threads. It trains a synthetic-data GPT with the 1F1B schedule (or each
// of --schedule's comma-separated list in turn, as `--schedule 1f1b,zb-h1`
// compares them) and m micro-batches, and prints one JSON line per schedule
// from the first rank with, per stage, the measured bubble (seconds blocked
// in pipeline receives / step seconds, median over steps) and its mean over
// the stages, next to the theoretical bubble at equal forward, input-grad
// and weight-grad times T: (p - 1) / (m + p - 1) for gpipe and 1F1B, and for
// zb-h1 (p - 1)(T_F + T_B - T_W) / (m (T_F + T_B + T_W) + (p - 1)(T_F + T_B -
// T_W)) = (p - 1) / (3m + p - 1) (Qi et al. 2023); and each stage's
// activation bytes as allocated next to the memory plan's
// (partition/memory_plan.h) and its step seconds (median).
#include <omp.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <fmt/format.h>
#include <nlohmann/json.hpp>
#include <vector>

#include "comm/groups.h"
#include "comm/in_process_comm.h"
#include "comm/world.h"
#include "core/rng.h"
#include "core/strings.h"
#include "train/engine.h"

using namespace tera;

namespace {

struct BenchArgs {
  int64_t layers = 8, hidden = 256, heads = 4, seq = 64, micro_batch = 2, micro = 16, steps = 5;
  bool recompute = false;
  ScheduleKind schedule = ScheduleKind::one_f_one_b;
  int in_process = 0;  // 0: one rank per process (mpirun)
  int threads = 1;     // OpenMP threads per rank
};

// One rank's part: every rank trains its stage, the first prints the JSON.
void run_rank(Communicator& comm, const BenchArgs& a) {
  omp_set_num_threads(a.threads);
  RunConfig cfg;
  cfg.model = ModelConfig{.layers = a.layers, .hidden = a.hidden, .heads = a.heads, .seq_len = a.seq, .vocab = 256,
                          .ffn_hidden = 0, .vocab_align = 64};
  cfg.parallel.micro_batch = a.micro_batch;
  cfg.train.global_batch = a.micro_batch * a.micro;
  cfg.train.lr = 1e-3f;
  cfg.parallel.recompute = a.recompute ? Recompute::full : Recompute::none;
  cfg.parallel.pp = comm.size();
  cfg.parallel.schedule = a.schedule;
  cfg.parallel.dp = 1;
  ProcessGroups groups(comm, cfg.parallel);
  Engine engine(cfg, cpu_backend(), groups.groups());
  engine.init_parameters(1);
  const int64_t seq = a.seq;
  const BatchFn data = [seq](int64_t first, int64_t count, int32_t* tok, int32_t* tgt) {
    const PhiloxKey key = philox_key(5, "bench");
    for (int64_t i = 0; i < count * seq; ++i) {
      tok[i] = static_cast<int32_t>(philox_below(key, static_cast<uint64_t>(first * seq + i), 256));
      tgt[i] = static_cast<int32_t>(philox_below(key, static_cast<uint64_t>(first * seq + i + 7), 256));
    }
  };
  std::vector<double> bubble, seconds;
  for (int64_t s = 0; s < a.steps + 1; ++s) {
    comm.barrier();
    engine.train_step(s, cfg.train.lr, data);
    if (s > 0) {
      bubble.push_back(engine.bubble_seconds() / engine.pipeline_seconds());
      seconds.push_back(engine.pipeline_seconds());
    }
  }
  std::sort(bubble.begin(), bubble.end());
  std::sort(seconds.begin(), seconds.end());
  const ParallelLayout layout = with_world_size(cfg.parallel, comm.size());
  const int64_t formula = rank_plan(cfg, layout, layout.coord(comm.rank())).bytes[MemoryClass::activations];
  double mine[4] = {bubble[bubble.size() / 2], static_cast<double>(engine.memory()[MemoryClass::activations]),
                    static_cast<double>(formula), seconds[seconds.size() / 2]};
  std::vector<double> all(static_cast<size_t>(4 * comm.size()));
  comm.all_gather(mine, all.data(), 4, CommType::f64);
  if (comm.rank() != 0) return;
  nlohmann::json stages = nlohmann::json::array();
  for (int r = 0; r < comm.size(); ++r) {
    stages.push_back({{"bubble", all[static_cast<size_t>(4 * r)]},
                      {"activation_bytes", static_cast<int64_t>(all[static_cast<size_t>(4 * r + 1)])},
                      {"activation_bytes_formula", static_cast<int64_t>(all[static_cast<size_t>(4 * r + 2)])},
                      {"step_seconds", all[static_cast<size_t>(4 * r + 3)]}});
  }
  const double p = comm.size(), m = static_cast<double>(a.micro);
  double mean = 0;
  for (int r = 0; r < comm.size(); ++r) mean += all[static_cast<size_t>(4 * r)] / p;
  const double one_f_one_b = (p - 1) / (m + p - 1);
  const double theoretical = splits_backward(a.schedule) ? (p - 1) / (3 * m + p - 1) : one_f_one_b;
  fmt::print("{}\n", nlohmann::json{{"schedule", schedule_kind_name(a.schedule)}, {"pp", comm.size()}, {"m", a.micro},
                                    {"recompute", a.recompute}, {"in_process", a.in_process > 0},
                                    {"threads_per_rank", a.threads}, {"theoretical_bubble", theoretical},
                                    {"theoretical_bubble_1f1b", one_f_one_b}, {"mean_bubble", mean},
                                    {"stages", stages}}
                         .dump());
  std::fflush(stdout);
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"tera pipeline benchmark (under mpirun, pp = number of ranks; or --in-process P)"};
  BenchArgs a;
  std::string schedule = "1f1b";
  app.add_option("--layers", a.layers)->capture_default_str();
  app.add_option("--hidden", a.hidden)->capture_default_str();
  app.add_option("--heads", a.heads)->capture_default_str();
  app.add_option("--seq", a.seq)->capture_default_str();
  app.add_option("--micro-batch", a.micro_batch, "sequences per micro-batch")->capture_default_str();
  app.add_option("-m,--micro-batches", a.micro, "micro-batches per step")->capture_default_str();
  app.add_option("--steps", a.steps)->capture_default_str();
  app.add_option("--schedule", schedule, "gpipe, 1f1b, interleaved or zb-h1, or a comma-separated list run in turn")
      ->capture_default_str();
  app.add_flag("--recompute", a.recompute, "full activation recomputation");
  app.add_option("--in-process", a.in_process, "run P ranks as threads of this process (no mpirun)")
      ->check(CLI::Range(2, 64));
  app.add_option("--threads", a.threads, "OpenMP threads per rank (default: OMP_NUM_THREADS, else 1)")
      ->check(CLI::Range(1, 256));
  CLI11_PARSE(app, argc, argv);
  if (app.count("--threads") == 0 && std::getenv("OMP_NUM_THREADS") != nullptr) a.threads = omp_get_max_threads();
  std::vector<ScheduleKind> kinds;
  for (const std::string& name : split(schedule, ',')) {
    auto kind = parse_schedule_kind(name);
    if (!kind) {
      fmt::print(stderr, "--schedule: {}\n", kind.error());
      return 2;
    }
    if (a.recompute && splits_backward(*kind)) {
      fmt::print(stderr, "--schedule {} with --recompute: zb-h1's weight gradients read the saved activations, "
                 "which recomputation drops; leave out --recompute\n", schedule_kind_name(*kind));
      return 2;
    }
    kinds.push_back(*kind);
  }
  auto run_all = [&](Communicator& comm) {
    for (ScheduleKind k : kinds) {
      BenchArgs mine = a;
      mine.schedule = k;
      run_rank(comm, mine);
    }
  };
  if (a.in_process > 0) {
    InProcessWorld::run(a.in_process, run_all);
  } else {
    auto world = CommWorld::init();
    run_all(world->world());
  }
  return 0;
}
