// The training loop: creation (checks, locks, groups, memory), steps, evaluation and the run; the
// checkpoint lifecycle is run_checkpoints.cpp. See trainer.h.
#include "train/trainer.h"

#include <algorithm>
#include <cmath>
#include <csignal>
#include <filesystem>
#include <fmt/format.h>

#include "comm/agree.h"
#include "comm/in_process_comm.h"
#include "config/config.h"
#include "core/file_util.h"
#include "core/format.h"
#include "core/timer.h"
#include "partition/layout_check.h"
#include "train/memory_check.h"
#include "train/preemption.h"
#include "train/run_outputs.h"

namespace tera {

namespace {

// What the data pipeline reads from the run config (data/ does not include config/).
TrainingDataOptions training_data_options(const RunConfig& cfg) {
  TrainingDataOptions o;
  o.train = cfg.data.train;
  o.val = cfg.data.val;
  o.val_fraction = cfg.data.val_fraction;
  o.tokenizer = cfg.data.tokenizer;
  o.tokenizer_pattern = cfg.data.tokenizer_pattern;
  o.tokenizer_specials = cfg.data.tokenizer_specials;
  o.blend = cfg.data.blend;
  o.seq_len = cfg.model.seq_len;
  o.vocab = cfg.model.vocab;
  o.seed = cfg.train.seed;
  o.source = cfg.source;
  return o;
}

}  // namespace

Trainer::~Trainer() = default;

Expected<std::unique_ptr<Trainer>> Trainer::create(const RunConfig& cfg, const Backend& backend) {
  auto world = std::make_unique<InProcessWorld>(1);
  auto comm = world->communicator(0);
  auto t = create(cfg, backend, *comm, TrainerOptions{});
  if (!t) return t.status();
  (*t)->own_world_ = std::move(world);
  (*t)->own_comm_ = std::move(comm);
  return t;
}

Expected<std::unique_ptr<Trainer>> Trainer::create(const RunConfig& cfg, const Backend& backend, Communicator& world,
                                                    const TrainerOptions& options) {
  auto t = std::unique_ptr<Trainer>(new Trainer(cfg, backend));
  const std::string& trace_path = options.trace_path;
  // Local checks first; then every rank learns whether any rank failed, so
  // nobody is left waiting in a collective.
  Status local = ok_status();
  // The config checked the layout against the model and batch; the world
  // size is known now, so the same check runs with it.
  if (Status s = check_layout(cfg.parallel, cfg.model, cfg.train.global_batch, world.size()); !s) {
    local = Status::error(cfg.source + ": " + s.message());
  }
  const ParallelLayout layout = with_world_size(cfg.parallel, world.size());
  // Outputs before any work: rank 0 owns out.dir and the checkpoint
  // directory for the whole run (a second run on either is refused), which
  // also proves both writable.
  if (local && world.rank() == 0) local = t->lock_outputs();
  if (local) {
    auto data = open_training_data(training_data_options(cfg));
    if (!data) {
      local = data.status();
    } else {
      t->data_ = std::move(*data);
    }
  }
  TERA_RETURN_IF_ERROR(agree(world, local, "another rank could not start (its message above names the problem)"));
  // The process groups, and each one's device communicator as the
  // backend's memory and this build allow (refused with the choices when
  // none can be made; the choice is the same on every rank).
  {
    DeviceCommSetup setup{cfg.train.backend, backend.addressing, DeviceCommOptions{cfg.train.device_comm, cfg.train.comm_timeout_s}};
    auto groups = ProcessGroups::create(world, layout, setup, static_cast<int>(ModelSpec(cfg.model).kv_replicas(layout.tp)));
    if (!groups) return Status::error(cfg.source + ": train.backend = \"" + cfg.train.backend + "\": " + groups.error());
    t->groups_ = std::move(*groups);
  }
  // Limits before allocation: every rank checks its own share, of its
  // device's memory where the backend reports it (one rank per device; what
  // its runtime still takes kept aside), else of the node's host memory.
  if (backend.reports_memory() || options.ranks_on_node > 0) {
    const std::string refusal = t->memory_refusal_of(layout, world.rank(), options.ranks_on_node);
    if (!refusal.empty()) local = Status::error(cfg.source + ": " + refusal);
  }
  // The lowest failing rank keeps its message: bad input every rank sees
  // (a layout the world cannot take) is printed once per job.
  TERA_RETURN_IF_ERROR(agree(world, local, "another rank could not start (its message above names the problem)",
                             AgreeReport::lowest_failed_rank));

  if (!trace_path.empty()) {
    t->trace_ = std::make_unique<Trace>(world.rank());
    t->trace_path_ = trace_path;
  }
  t->engine_ = std::make_unique<Engine>(cfg, backend, t->groups_->groups(), t->trace_.get(),
                                        EngineOptions{.nonfinite_steps = options.test_nonfinite_steps});
  t->groups_->set_trace(t->trace_.get());
  t->engine_->init_parameters(cfg.train.seed);
  t->schedule_ = LrSchedule{cfg.train.lr, cfg.train.min_lr, cfg.train.warmup, cfg.train.steps};
  return t;
}

Status Trainer::lock_outputs() {
  for (const auto& [what, dir] : {std::pair<std::string, std::string>{"out.dir", cfg_.out.dir}, {"ckpt.dir", cfg_.ckpt.dir}}) {
    if (dir.empty()) continue;
    TERA_RETURN_IF_ERROR(probe_output_dir(dir, what));
    if (what == "ckpt.dir" && same_file(dir, cfg_.out.dir)) continue;  // one directory, one lock
    auto lock = RunLock::acquire(dir, what);
    if (!lock) return lock.status();
    locks_.push_back(std::move(*lock));
  }
  return ok_status();
}

std::string Trainer::memory_refusal_of(const ParallelLayout& layout, int rank, int ranks_on_node) const {
  const MemoryReport need = estimate_rank_memory(cfg_, layout, layout.coord(rank));
  if (!be_.reports_memory()) return host_memory_refusal(need, ranks_on_node, rank);
  const int64_t available = be_.memory_available();
  const int64_t reserved = be_.memory_reserved() + groups_->device_comm_reserved_bytes();
  const std::string what = std::string(be_.name) + " device memory" +
                           (reserved > 0 ? " (after " + human_bytes(reserved) + " kept for the GPU runtime, its libraries' "
                                                           "workspaces and the communication library's buffers)"
                                         : "");
  return memory_refusal(need, available > 0 ? std::max<int64_t>(1, available - reserved) : 0, 1, rank, what);
}

StepStats Trainer::step() {
  const TrainConfig& tc = cfg_.train;
  const Groups& g = groups();
  const int64_t T = cfg_.model.seq_len, G = tc.global_batch;
  const int64_t s = next_step_++;
  groups_->reset_stats();
  Stopwatch sw;
  const float lr = schedule_.at(s);
  const StepResult r = engine_->train_step(s, lr, [&](int64_t first, int64_t count, int32_t* tok, int32_t* tgt) {
    data_.sampler->fill(first, count, tok, tgt);
  });
  // The slowest rank's communication (time blocked, bytes sent).
  const CommStats cs = groups_->stats();
  double worst[2] = {cs.wait_seconds, static_cast<double>(cs.bytes)};
  g.world->all_reduce(worst, 2, CommType::f64, ReduceOp::max);

  StepStats st;
  st.step = s + 1;
  st.total = tc.steps;
  st.loss = r.loss;
  st.lr = lr;
  st.grad_norm = r.grad_norm;
  st.skipped = r.skipped;
  st.bad_groups = r.bad_groups;
  st.update_nonfinite = r.update_nonfinite;
  st.seconds = sw.seconds();
  st.tokens_per_s = static_cast<double>(G * T) / st.seconds;
  st.gflops = st.tokens_per_s * spec().train_flops_per_token() / 1e9 / g.layout.world();
  st.comm_seconds = worst[0];
  st.comm_bytes = static_cast<int64_t>(worst[1]);
  // Each stage's bubble: the first rank of each stage reports it.
  const int pp = g.layout.pp;
  std::vector<double> bubble(static_cast<size_t>(pp), 0.0);
  if (g.coord.tp == 0 && g.coord.dp == 0 && g.coord.cp == 0) {
    bubble[static_cast<size_t>(g.coord.pp)] = engine_->bubble_seconds() / std::max(1e-12, engine_->pipeline_seconds());
  }
  g.world->all_reduce(bubble.data(), pp, CommType::f64, ReduceOp::sum);
  st.bubble = bubble;
  const bool last = st.step == tc.steps;
  if ((tc.eval_every > 0 && st.step % tc.eval_every == 0) || last) {
    Stopwatch eval_time;
    st.val_loss = evaluate();
    st.eval_seconds = eval_time.seconds();
    st.interrupted = !st.val_loss.has_value();
  }
  return st;
}

std::optional<double> Trainer::evaluate() {
  const int64_t T = cfg_.model.seq_len, n = cfg_.train.eval_sequences;
  Stopwatch since_report;
  const auto sum = engine_->eval_loss_sum(
      n, [&](int64_t first, int64_t count, int32_t* tok, int32_t* tgt) {
        fill_sequential_windows(*data_.val, T, first, count, tok, tgt);
      },
      EvalControl{.stop = [] { return preemption_signal() != 0; },
                  .progress =
                      [&](int64_t done) {
                        if (since_report.seconds() < 10) return;
                        since_report = Stopwatch();
                        log(fmt::format("  evaluating: {}/{} sequences ({:.0f}%)", done, n, 100.0 * done / n));
                      }});
  if (!sum) return std::nullopt;
  return *sum / static_cast<double>(n * T);
}

void Trainer::log(const std::string& msg) const {
  if (!is_first_rank()) return;
  if (log_) {
    log_(msg);
  } else {
    fmt::print(stderr, "tera: {}\n", msg);
  }
}

std::string Trainer::checkpoint_root() const { return tera::checkpoint_root(cfg_); }

Status Trainer::run(const std::function<void(const StepStats&)>& on_step) {
  install_preemption_handlers();
  const TrainConfig& tc = cfg_.train;
  int64_t bad_in_a_row = 0;
  end_ = RunEnd::completed;
  while (next_step_ < tc.steps) {
    const StepStats st = step();
    on_step(st);
    bad_in_a_row = st.skipped ? bad_in_a_row + 1 : 0;
    // Every rank must agree on stopping: a signal may reach ranks at different
    // times, so they agree on the signal too (the first rank, which logs it,
    // may not have received its own yet).
    const int stop_signal = static_cast<int>(groups().world->all_reduce_max(static_cast<double>(preemption_signal())));
    const bool signalled = stop_signal != 0;
    const bool too_bad = bad_in_a_row >= tc.max_bad_steps;
    const bool periodic = cfg_.ckpt.every > 0 && st.step % cfg_.ckpt.every == 0;
    const bool last = st.step == tc.steps && !cfg_.ckpt.dir.empty();
    if (too_bad) {
      log(fmt::format("error: {} consecutive steps had non-finite loss or gradients (train.max_bad_steps = {}); "
                      "stopping with a checkpoint of the last good parameters. Lower train.lr or raise train.warmup, "
                      "then resume",
                      bad_in_a_row, tc.max_bad_steps));
    }
    if (signalled) {
      log(fmt::format("{} received{}: checkpointing after step {} and exiting{}", signal_name(stop_signal),
                      stop_signal == SIGPIPE   ? " (the output's reader is gone)"
                      : stop_signal == SIGHUP ? " (the terminal is gone)"
                                              : "",
                      st.step, stop_signal == SIGPIPE || stop_signal == SIGHUP ? "" : " (a second request exits at once)"));
    }
    if (signalled || too_bad || periodic || last) TERA_RETURN_IF_ERROR(checkpoint_and_log());
    if (too_bad) {
      end_ = RunEnd::bad_steps;
      return ok_status();
    }
    if (signalled) {
      end_ = RunEnd::preempted;
      return ok_status();
    }
  }
  return ok_status();
}

std::vector<float> Trainer::gather_parameters() { return engine_->gather_parameters(); }

MemoryReport Trainer::memory() const { return engine_->memory(); }

Status Trainer::write_trace() {
  if (trace_ == nullptr) return ok_status();
  groups_->set_trace(nullptr);  // the gathering below is not part of the run
  return write_chrome_trace(trace_path_, *groups().world, *trace_, groups().layout);
}

double Trainer::theoretical_bubble() const {
  const Schedule& s = engine_->schedule();
  const double p = s.stages, m = s.micro_batches, v = s.kind == ScheduleKind::interleaved ? s.chunks : 1;
  return (p - 1) / (v * m + p - 1);
}

}  // namespace tera
