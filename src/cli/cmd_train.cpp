// `tera train`: config -> Trainer -> step lines (+ JSONL metrics) -> final checkpoint.
#include <omp.h>

#include <CLI/CLI.hpp>
#include <memory>

#include <algorithm>
#include <string_view>
#include <cerrno>
#include <cmath>
#include <cstring>
#include <cstdlib>
#include <filesystem>
#include <vector>
#include <fmt/format.h>
#include <fstream>

#include "cli/commands.h"
#include "cli/console.h"
#include "cli/rank_device.h"
#include "cli/rank_threads.h"
#include "cli/train_metrics.h"
#include "comm/agree.h"
#include "comm/world.h"
#include "config/config.h"
#include "core/file_util.h"
#include "core/format.h"
#include "kernels/backend_registry.h"
#include "kernels/profiling_backend.h"
#include "train/preemption.h"
#include "train/run_outputs.h"
#include "train/trainer.h"

namespace tera::cli {

namespace {

struct TrainArgs {
  std::string config;
  std::vector<std::string> overrides;
  std::string metrics;  // JSONL path, empty: none
  std::string trace;    // Chrome trace path, empty: none
  std::string resume;   // "", "auto" or a checkpoint directory
  bool quiet = false;
  bool profile = false;  // time every compute op; each rank prints a table at the end
  bool start_over = false;       // delete an earlier run's checkpoints in ckpt.dir
  bool change_schedule = false;  // resume with other train.steps / lr / min_lr / warmup
  bool discard_newer = false;    // resume before later checkpoints, deleting them
  std::vector<int64_t> test_nonfinite_steps;  // hidden test hook (EngineOptions::nonfinite_steps)
};

// Checks --metrics and --trace before any work (out.dir and ckpt.dir are the
// trainer's, which also locks them); false, printed by rank 0, when one is unusable.
bool check_output_flags(const TrainArgs& args, Communicator& comm) {
  const bool first = comm.rank() == 0;
  Status outputs = ok_status();
  if (first) {
    for (const auto& [flag, path] : {std::pair<const char*, std::string>{"--metrics", args.metrics}, {"--trace", args.trace}}) {
      if (!path.empty() && outputs) outputs = probe_output_file(path, flag);
    }
  }
  if (Status s = agree(comm, outputs, "rank 0 refused an output (see its message)"); !s) {
    if (first) print_error(s.message());
    return false;
  }
  return true;
}

// Opens --metrics on rank 0: a resumed run keeps the lines up to its step and
// appends. False, printed by rank 0, when it cannot (every rank learns it).
bool open_metrics(const TrainArgs& args, const Trainer& tr, Communicator& comm, std::ofstream* metrics) {
  const bool first = comm.rank() == 0;
  Status metrics_st = ok_status();
  if (first && !args.metrics.empty()) {
    if (tr.resumed()) metrics_st = truncate_metrics(args.metrics, tr.next_step());
    if (metrics_st) {
      metrics->open(args.metrics, tr.resumed() ? std::ios::out | std::ios::app : std::ios::out | std::ios::trunc);
      if (!*metrics) metrics_st = Status::error("--metrics " + args.metrics + ": cannot open for writing");
    }
  }
  if (Status s = agree(comm, metrics_st, "rank 0 could not open --metrics (see its message)"); !s) {
    if (first) print_error(s.message());
    return false;
  }
  return true;
}

// The run's header, printed by rank 0 unless --quiet: model, data, layout,
// batch, every rank's memory in rank order, compute. Collective (the memory gather).
void print_header(const TrainArgs& args, const RunConfig& cfg, const Trainer& tr, Communicator& comm,
                  const CommWorld& world, const std::string& threads_note) {
  const ModelSpec& spec = tr.spec();
  const TrainConfig& tc = cfg.train;
  const Groups& g = tr.groups();
  const MemoryReport mem = tr.memory();
  constexpr int K = kMemoryClasses;
  std::vector<int64_t> all(static_cast<size_t>(K * comm.size()));
  comm.all_gather(mem.bytes.data(), all.data(), K, CommType::i64);
  if (comm.rank() != 0 || args.quiet) return;
  print_out(fmt::format("tera train: {}\n", args.config));
  print_out(fmt::format("model: {} layers, hidden {}, {} heads, seq {}, vocab {} (padded {}) = {} parameters\n",
             cfg.model.layers, cfg.model.hidden, cfg.model.heads, cfg.model.seq_len, cfg.model.vocab,
             spec.padded_vocab(), human_count(static_cast<double>(spec.num_params()))));
  print_out(fmt::format("data: train {}, val {}\n", tr.train_description(), tr.val_data().describe()));
  print_out(fmt::format("layout: {} ranks = {}, ZeRO-{}{}{}, {} threads per rank{}{}\n", comm.size(), g.layout.to_string(),
             cfg.parallel.zero, cfg.parallel.sequence_parallel ? ", sequence parallel" : "",
             g.layout.pp > 1 ? fmt::format(", {} schedule{}", schedule_kind_name(cfg.parallel.schedule),
                                           cfg.parallel.vpp > 1 ? fmt::format(" x{} chunks", cfg.parallel.vpp) : "")
                             : "",
             omp_get_max_threads(), threads_note, world.is_mpi() ? " (MPI)" : ""));
  if (cfg.parallel.recompute == Recompute::full) print_out("recompute: full (each block's forward rerun in backward)\n");
  print_out(fmt::format("batch: {} sequences x {} tokens per step; per data-parallel rank {} micro-batches of {}{}; {} steps\n",
             tc.global_batch, cfg.model.seq_len, tc.global_batch / g.layout.dp / g.layout.micro_batch, g.layout.micro_batch,
             g.layout.cp > 1 ? fmt::format(", each sequence's tokens split over {} context-parallel ranks ({} each, ring "
                                           "attention)", g.layout.cp, cfg.model.seq_len / g.layout.cp)
                             : "",
             tc.steps));
  for (int r = 0; r < comm.size(); ++r) {
    // Every class this rank holds (the memory plan's), then the total.
    std::string line;
    int64_t total = 0;
    for (int k = 0; k < K; ++k) {
      const int64_t b = all[static_cast<size_t>(K * r + k)];
      total += b;
      if (b > 0) line += fmt::format("{}{} {}", line.empty() ? "" : ", ", memory_class_name(kAllMemoryClasses[k]), human_bytes(b));
    }
    print_out(fmt::format("memory rank {}: {} = {}\n", r, line, human_bytes(total)));
  }
  print_out(fmt::format("compute: {} backend, GEMM by {}; {:.1f} MFLOP per token\n", tr.backend().name,
                        tr.backend().gemm_library, spec.train_flops_per_token() / 1e6));
  print_out(fmt::format("backend {}: {}\n", tr.backend().name, tr.device_comm()));
  const DeviceQueue* gpu = tr.backend().addressing.queue;
  if (gpu != nullptr && std::string(gpu->vendor()) != "" && cfg.train.precision != DType::bf16) {
    print_out("note: train.precision = \"fp32\" on a GPU runs full-fp32 GEMMs (no tensor cores) and the scalar "
              "attention kernels; bf16 is the GPU precision (train.precision = \"bf16\")\n");
  }
  if (cfg.train.precision == DType::bf16) {
    print_out(fmt::format("precision: bf16 inputs to the GEMMs and flash attention's products, fp32 accumulation; "
               "activations kept in bf16 but the residual stream; fp32 master weights, statistics and reductions; "
               "bf16 GEMMs by {}\n", tr.backend().gemm_bf16_path()));
  }
}

// What the steps add up to, for the summary, the bubble and the profile lines.
struct RunTally {
  double elapsed = 0, first_loss = 0, last_loss = 0;
  double profiled_seconds = 0;  // step and evaluation time since the profile was reset (after the first step)
  std::optional<double> last_val;
  std::vector<double> bubble_sum;  // [pp]
  int64_t bubble_steps = 0;
  int64_t steps = 0;           // steps this invocation ran
  std::string metrics_error;   // rank 0: why --metrics stopped (the record is incomplete)
};

// Adds one step to the tally; the first step (page faults, one-time setup) is
// left out of the profile and the bubble, and resets the profile with --profile.
void tally_step(const StepStats& s, int64_t start_step, const Backend* profiled, RunTally* t) {
  t->elapsed += s.seconds;
  ++t->steps;
  if (s.step == start_step + 1) t->first_loss = s.loss;
  if (profiled != nullptr && s.step == start_step + 1) profiling_reset(*profiled);
  if (s.step > start_step + 1) t->profiled_seconds += s.seconds + s.eval_seconds;  // the ops the profile counted
  t->last_loss = s.loss;
  if (s.val_loss) t->last_val = s.val_loss;
  if (s.step > start_step + 1) {  // the first step includes page faults
    for (size_t i = 0; i < t->bubble_sum.size() && i < s.bubble.size(); ++i) t->bubble_sum[i] += s.bubble[i];
    ++t->bubble_steps;
  }
}

// The line saying a step's update was skipped, and where the non-finite values were.
void print_skipped(const StepStats& s) {
  std::string groups;
  for (const auto& b : s.bad_groups) groups += (groups.empty() ? "" : ", ") + b;
  print_out(fmt::format("step {}: {} (in {}); skipped, parameters unchanged\n", s.step,
             s.update_nonfinite ? "the update would make parameters non-finite" : "non-finite loss or gradient",
             groups.empty() ? "the loss" : groups));
}

// One step's progress line (and its val_loss and interruption notes); `eta` in seconds.
void print_step_line(const StepStats& s, double eta, int ranks) {
  print_out(fmt::format("step {:>{}}/{} | loss {:.4f} | lr {:.2e} | gnorm {:.3f} | {:.0f} ms | {:.0f} tok/s | {:.1f} GFLOP/s{} | "
             "eta {}\n",
             s.step, std::to_string(s.total).size(), s.total, s.loss, s.lr, s.grad_norm, s.seconds * 1e3,
             s.tokens_per_s, s.gflops,
             ranks > 1 ? fmt::format(" | comm {:.0f} ms {}", s.comm_seconds * 1e3, human_bytes(s.comm_bytes)) : "",
             human_duration(eta)));
  if (s.val_loss) print_out(fmt::format("  val_loss {:.4f}\n", *s.val_loss));
  if (s.interrupted) print_out("  evaluation interrupted by a stop signal\n");
}

// Runs the steps: each is tallied, and rank 0 prints its line and writes its
// metrics. A failed run aborts every rank.
RunTally run_steps(const TrainArgs& args, Trainer& tr, Communicator& comm, CommWorld& world, std::ofstream& metrics,
                   const Backend* profiled) {
  const bool first = comm.rank() == 0;
  const int64_t start_step = tr.next_step();
  RunTally t;
  t.bubble_sum.assign(static_cast<size_t>(tr.groups().layout.pp), 0.0);
  const Status st = tr.run([&](const StepStats& s) {
    tally_step(s, start_step, profiled, &t);
    if (!first) return;
    // Which path each GEMM took (cuda: cuBLASLt, or the fallback and why), once.
    if (s.step == start_step + 1 && !args.quiet) {
      if (const std::string paths = tr.backend().gemm_report(); !paths.empty()) {
        fmt::print("GEMM paths ({} backend, after step {}):\n{}", tr.backend().name, s.step, paths);
      }
    }
    if (s.skipped) print_skipped(s);
    // ETA from the mean step time so far (the first step includes page faults).
    const double eta = t.elapsed / static_cast<double>(s.step - start_step) * static_cast<double>(s.total - s.step);
    if (!args.quiet) print_step_line(s, eta, comm.size());
    if (metrics.is_open() && !write_metrics_line(s, metrics)) {
      // Said at once and at the end; the run goes on (its checkpoints and weights are the work).
      t.metrics_error = fmt::format("--metrics {}: writing step {} failed ({}); the file ends before it", args.metrics,
                                    s.step, std::strerror(errno));
      print_error(t.metrics_error + "; training goes on");
      metrics.close();
    }
  });
  if (!st) {
    print_error(st.message());
    world.abort(kExitFailure);
  }
  return t;
}

// Rank 0's mean pipeline bubble per stage over steps 2.., beside the theoretical one.
void print_bubble(const RunTally& t, const Trainer& tr) {
  std::string per;
  for (size_t i = 0; i < t.bubble_sum.size(); ++i) {
    per += fmt::format("{}stage {} {:.1f}%", i ? ", " : "", i, 100 * t.bubble_sum[i] / static_cast<double>(t.bubble_steps));
  }
  print_out(fmt::format("pipeline bubble (time blocked in pipeline receives / step, mean of steps 2..): {}; theoretical "
             "(p-1)/(v*m+p-1) = {:.1f}%\n",
             per, 100 * tr.theoretical_bubble()));
}

// Each rank's --profile table, rank by rank so the tables do not interleave. Collective.
void print_profiles(const RunTally& t, Communicator& comm, const Backend& profiled) {
  for (int r = 0; r < comm.size(); ++r) {
    comm.barrier();
    if (r != comm.rank()) continue;
    print_out(fmt::format("profile rank {} (steps after the first and their evaluations; wall clock in each compute op):\n"
               "{}{:<26} {:>8} {:>10.1f}\n",
               r, profiling_report(profiled), "steps + evaluations", "", t.profiled_seconds * 1e3));
  }
}

// The exit code from how the run ended and whether the final weights and the
// run's record (trace, metrics) were written; rank 0 prints the closing line.
int finish_run(const RunConfig& cfg, const Trainer& tr, const RunTally& t, bool first, RunEnd end,
               const Status& final_st, const Status& trace_st) {
  const bool record = trace_st && t.metrics_error.empty();
  if (first && !t.metrics_error.empty()) print_error(t.metrics_error + "; the run's record is incomplete");
  if (end == RunEnd::preempted) {
    if (first) print_note(fmt::format("preempted at step {}; continue with --resume auto\n", tr.next_step()));
    return record ? kExitOk : kExitFailure;
  }
  if (end == RunEnd::bad_steps) return kExitFailure;
  if (!final_st) {
    if (first) print_error(final_st.message());
    return kExitFailure;
  }
  const std::string out = (std::filesystem::path(cfg.out.dir) / "final").string();
  if (!record) {
    if (first) {
      print_note(fmt::format("done, but the {} was not written (see above); weights {}\n",
                            trace_st ? "metrics file" : "trace", out));
    }
    return kExitFailure;
  }
  if (first && t.steps == 0) {
    print_note(fmt::format("done: the run was already complete at step {} = train.steps (nothing to train); weights "
                          "{}\n", tr.next_step(), out));
  } else if (first) {
    print_note(fmt::format("done: {} steps in {}, loss {:.4f} -> {:.4f}{}; weights {}\n", t.steps,
                          human_duration(t.elapsed), t.first_loss, t.last_loss,
                          t.last_val ? fmt::format(", val_loss {:.4f}", *t.last_val) : "", out));
  }
  return kExitOk;
}

// The final weights of a run whose last loss is finite; a run that ends
// non-finite leaves no final (its checkpoints hold the last good state).
Status save_final_if_finite(Trainer& tr, const RunTally& t) {
  if (t.steps > 0 && (!std::isfinite(t.last_loss) || (t.last_val && !std::isfinite(*t.last_val)))) {
    return Status::error(fmt::format("the run ended with a non-finite loss (step {}: loss {}{}); the final weights are "
                                     "not written. Lower train.lr or raise train.warmup, and resume from the last "
                                     "good checkpoint",
                                     tr.next_step(), t.last_loss,
                                     t.last_val ? fmt::format(", val_loss {}", *t.last_val) : ""));
  }
  return tr.save_final();
}

// `tera train`: checks the outputs, starts (or resumes) the trainer, runs the
// steps, then saves the final weights, the trace and the closing lines.
int run_train(const TrainArgs& args) {
  route_stop_signals_to_a_thread();  // before MPI, OpenMP or the data loader start threads
  set_console_lost_hook(request_stop);  // `tera train | head`: the run checkpoints, output stops
  auto cfg = load_run_config(args.config, args.overrides);
  if (!cfg) {
    print_error_once(cfg.error());
    return kExitBadInput;
  }
  if (Status s = check_run_paths(*cfg, args.config, args.metrics, args.trace); !s) {
    print_error_once(s.message());
    return kExitBadInput;
  }
  std::unique_ptr<Backend> chosen = start_backend(cfg->train.backend, cfg->source + ": train.backend");
  if (chosen == nullptr) return kExitBadInput;
  if (cfg->train.precision == DType::bf16 && !missing_bf16_ops(*chosen).empty()) {
    print_error_once(fmt::format("{}: train.precision = \"bf16\" needs bf16 GEMMs, which the {} backend does not have; "
                            "use train.precision = \"fp32\"", cfg->source, chosen->name));
    return kExitBadInput;
  }
  if (cfg->parallel.cp > 1 && !missing_cp_ops(*chosen).empty()) {
    print_error_once(fmt::format("{}: parallel.cp = {} needs the ring attention ops ({}), which the {} backend does not "
                                 "have; use parallel.cp = 1 or another train.backend",
                                 cfg->source, cfg->parallel.cp, missing_cp_ops(*chosen), chosen->name));
    return kExitBadInput;
  }
  // The GPU first, from the launcher's local rank, before MPI_Init.
  const LocalPlace place = launcher_local_place();
  if (const std::string why = bind_before_mpi(*chosen, place); !why.empty()) {
    print_error(fmt::format("{}: train.backend = \"{}\", local rank {} of {}: {}", cfg->source, chosen->name, place.rank,
                            place.size, why));
    return kExitBadInput;
  }
  auto world = CommWorld::init();
  world->set_comm_timeout(cfg->train.comm_timeout_s);
  Communicator& comm = world->world();
  const bool first = comm.rank() == 0;
  const ThreadChoice threads = threads_per_rank(world->local_size());
  omp_set_num_threads(threads.threads);
  if (!check_output_flags(args, comm)) return kExitBadInput;
  if (!bind_rank_device(*chosen, *world, place)) return kExitBadInput;
  std::unique_ptr<Backend> profiled = args.profile ? make_profiling_backend(*chosen) : nullptr;
  const Backend& backend = profiled != nullptr ? *profiled : *chosen;
  auto trainer = Trainer::create(*cfg, backend, comm,
                                 TrainerOptions{.trace_path = args.trace,
                                                .ranks_on_node = world->local_size(),
                                                .test_nonfinite_steps = args.test_nonfinite_steps});
  if (!trainer) {
    // Every rank fails together; the rank that saw the problem prints it.
    if (first || trainer.status().kind() != StatusKind::peer_failed) print_error(trainer.error());
    return kExitBadInput;
  }
  Trainer& tr = **trainer;
  tr.set_log([](const std::string& m) {
    print_note(fmt::format("{}\n", m));
  });
  if (Status s = tr.start(StartOptions{.resume = args.resume, .start_over = args.start_over,
                                       .change_schedule = args.change_schedule, .discard_newer = args.discard_newer});
      !s) {
    if (first || s.kind() != StatusKind::peer_failed) print_error(s.message());
    return kExitBadInput;
  }
  std::ofstream metrics;
  if (!open_metrics(args, tr, comm, &metrics)) return kExitBadInput;
  print_header(args, *cfg, tr, comm, *world, threads.note);
  const RunTally tally = run_steps(args, tr, comm, *world, metrics, profiled.get());
  // The weights first: an output that fails late must never cost them.
  const RunEnd end = tr.end();
  Status final_st = ok_status();
  if (end == RunEnd::completed) final_st = save_final_if_finite(tr, tally);
  Status trace_st = tr.write_trace();
  if (!trace_st && first) print_error("could not write the trace: " + trace_st.message());
  if (first && tr.groups().layout.pp > 1 && tally.bubble_steps > 0 && !args.quiet) print_bubble(tally, tr);
  if (profiled != nullptr) print_profiles(tally, comm, *profiled);
  if (!args.trace.empty() && first) print_out(fmt::format("trace: {} (open in https://ui.perfetto.dev or chrome://tracing)\n", args.trace));
  return finish_run(*cfg, tr, tally, first, end, final_st, trace_st);
}

}  // namespace

Command add_train_command(CLI::App& parent) {
  auto args = std::make_shared<TrainArgs>();
  auto* sub = parent.add_subcommand("train", "Train a model from a TOML config");
  sub->add_option("-c,--config", args->config, "Run config (TOML); see configs/")->required();
  sub->add_option("--set", args->overrides, "Override a config value: --set section.key=value (repeatable)");
  sub->add_option("--metrics", args->metrics, "Write one JSON object per step to this JSONL file");
  sub->add_option("--trace", args->trace, "Write a Chrome trace (one track per rank) to this JSON file");
  sub->add_flag("--profile", args->profile,
                "Time every compute op; at the end each rank prints ms per op kind and the step total (the "
                "difference is communication wait and framework time)");
  sub->add_option("--resume", args->resume,
                  "Continue a run: 'auto' (the newest valid checkpoint under ckpt.dir; none: start fresh) or a "
                  "checkpoint directory (ckpt.dir/step-N); any layout can resume any other's checkpoint");
  sub->add_flag("--start-over", args->start_over,
                "Start a fresh run even though ckpt.dir holds an earlier run's checkpoints (deleted first) or out.dir "
                "an earlier run's final weights (replaced once this run's are complete); without it such a run is "
                "refused");
  sub->add_flag("--discard-newer", args->discard_newer,
                "With --resume DIR: continue from DIR even though ckpt.dir holds later checkpoints (or out.dir a later "
                "final); the later checkpoints are deleted first (without it such a resume is refused)");
  sub->add_flag("--change-schedule", args->change_schedule,
                "With --resume: accept a train.steps, lr, min_lr, warmup, weight_decay, beta1, beta2, eps or clip that "
                "differs from the checkpoint's (the change is printed; without it such a resume is refused)");
  sub->add_flag("-q,--quiet", args->quiet, "Print only the summary");
  // Hidden (no help group): tests of the non-finite skip path poison world
  // rank 0's embedding gradient at these 1-based steps.
  sub->add_option("--test-nonfinite-steps", args->test_nonfinite_steps, "")
      ->delimiter(',')
      ->check(CLI::PositiveNumber)
      ->group("");
  return {sub, [args] { return run_train(*args); }};
}

}  // namespace tera::cli
