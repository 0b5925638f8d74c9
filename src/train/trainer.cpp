// Training loop; see trainer.h.
#include "train/trainer.h"

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fmt/format.h>

#include "ckpt/model_checkpoint.h"
#include "comm/fake_comm.h"
#include "config/config.h"
#include "core/timer.h"

namespace tera {

namespace {

// Checks that need the world size; the message names every factor.
Status check_layout(const RunConfig& cfg, const Layout& layout) {
  const ParallelConfig& p = cfg.parallel;
  const TrainConfig& t = cfg.train;
  if (t.global_batch % (t.micro_batch * layout.dp) != 0) {
    return Status::error(fmt::format(
        "{}: train.global_batch = {} is not a multiple of train.micro_batch ({}) x data-parallel degree ({}) = {}; "
        "every data-parallel rank needs a whole number of micro-batches",
        cfg.source, t.global_batch, t.micro_batch, layout.dp, t.micro_batch * layout.dp));
  }
  const int64_t micro = t.global_batch / layout.dp / t.micro_batch;
  if (auto s = make_schedule(p.schedule, layout.pp, static_cast<int>(micro), p.vpp); !s) {
    return Status::error(fmt::format("{}: the pipeline schedule for {} micro-batches per data-parallel rank "
                                     "(train.global_batch / (micro_batch x dp)): {}",
                                     cfg.source, micro, s.error()));
  }
  return Status::ok();
}

}  // namespace

Trainer::~Trainer() = default;

Expected<std::unique_ptr<Trainer>> Trainer::create(const RunConfig& cfg, const Backend& backend) {
  auto world = std::make_unique<FakeWorld>(1);
  auto comm = world->communicator(0);
  auto t = create(cfg, backend, *comm);
  if (!t) return t.status();
  (*t)->own_world_ = std::move(world);
  (*t)->own_comm_ = std::move(comm);
  return t;
}

Expected<std::unique_ptr<Trainer>> Trainer::create(const RunConfig& cfg, const Backend& backend, Communicator& world,
                                                    const std::string& trace_path) {
  auto t = std::unique_ptr<Trainer>(new Trainer(cfg, backend));
  // Local checks first; then every rank learns whether any rank failed, so
  // nobody is left waiting in a collective.
  Status local = Status::ok();
  auto layout = make_layout(cfg.parallel.tp, cfg.parallel.pp, cfg.parallel.dp, world.size());
  if (!layout) {
    local = Status::error(cfg.source + ": " + layout.error());
  } else {
    local = check_layout(cfg, *layout);
  }
  if (local) {
    auto data = open_training_data(cfg);
    if (!data) {
      local = data.status();
    } else {
      t->data_ = std::move(*data);
    }
  }
  if (world.all_reduce_max(local ? 0.0 : 1.0) > 0) {
    if (!local) return local;
    return Status::error("another rank could not start (its message above names the problem)");
  }

  t->groups_ = std::make_unique<ProcessGroups>(world, *layout);
  if (!trace_path.empty()) {
    t->trace_ = std::make_unique<Trace>(world.rank());
    t->trace_path_ = trace_path;
  }
  t->engine_ = std::make_unique<Engine>(cfg, backend, t->groups_->groups(), t->trace_.get());
  t->groups_->set_trace(t->trace_.get());
  t->engine_->init_parameters(cfg.train.seed);
  t->schedule_ = LrSchedule{cfg.train.lr, cfg.train.min_lr, cfg.train.warmup, cfg.train.steps};
  return t;
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
  st.seconds = sw.seconds();
  st.tokens_per_s = static_cast<double>(G * T) / st.seconds;
  st.gflops = st.tokens_per_s * spec().train_flops_per_token() / 1e9 / g.layout.world();
  st.comm_seconds = worst[0];
  st.comm_bytes = static_cast<int64_t>(worst[1]);
  // Each stage's bubble: the first rank of each stage reports it.
  const int pp = g.layout.pp;
  std::vector<double> bubble(static_cast<size_t>(pp), 0.0);
  if (g.coord.tp == 0 && g.coord.dp == 0) {
    bubble[static_cast<size_t>(g.coord.pp)] = engine_->bubble_seconds() / std::max(1e-12, engine_->pipeline_seconds());
  }
  g.world->all_reduce(bubble.data(), pp, CommType::f64, ReduceOp::sum);
  st.bubble = bubble;
  const bool last = st.step == tc.steps;
  if ((tc.eval_every > 0 && st.step % tc.eval_every == 0) || last) st.val_loss = evaluate();
  return st;
}

double Trainer::evaluate() {
  const int64_t T = cfg_.model.seq_len, n = cfg_.train.eval_sequences;
  const double sum = engine_->eval_loss_sum(n, [&](int64_t first, int64_t count, int32_t* tok, int32_t* tgt) {
    fill_sequential_windows(*data_.val, T, first, count, tok, tgt);
  });
  return sum / static_cast<double>(n * T);
}

Status Trainer::run(const std::function<void(const StepStats&)>& on_step) {
  while (next_step_ < cfg_.train.steps) on_step(step());
  return Status::ok();
}

std::vector<float> Trainer::gather_parameters() { return engine_->gather_parameters(); }

Status Trainer::save_final() {
  const auto tensors = engine_->gather_global_parameters();
  Status st = Status::ok();
  if (is_first_rank()) {
    CheckpointMeta meta;
    meta.model = cfg_.model;
    meta.step = next_step_;
    meta.tokenizer = data_.tokenizer;
    meta.extra = {{"config_toml", run_config_to_toml(cfg_)}, {"micro_batch", cfg_.train.micro_batch}};
    const std::string dir = (std::filesystem::path(cfg_.out.dir) / "final").string();
    std::vector<NamedTensor> named;
    for (const auto& [info, data] : tensors) named.push_back({info->name, info->shape, data.data()});
    st = save_model_checkpoint(dir, named, meta);
  }
  if (groups().world->all_reduce_max(st ? 0.0 : 1.0) > 0 && st) {
    return Status::error("the first rank could not write the checkpoint (see its message)");
  }
  return st;
}

MemoryReport Trainer::memory() const { return engine_->memory(); }

Status Trainer::write_trace() {
  if (trace_ == nullptr) return Status::ok();
  groups_->set_trace(nullptr);  // the gathering below is not part of the run
  return write_chrome_trace(trace_path_, *groups().world, *trace_);
}

double Trainer::theoretical_bubble() const {
  const Schedule& s = engine_->schedule();
  const double p = s.stages, m = s.micro_batches, v = s.kind == ScheduleKind::interleaved ? s.chunks : 1;
  return (p - 1) / (v * m + p - 1);
}

}  // namespace tera
