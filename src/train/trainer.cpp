// Training loop; see trainer.h.
#include "train/trainer.h"

#include <algorithm>
#include <cmath>
#include <csignal>
#include <filesystem>
#include <fmt/format.h>

#include "ckpt/model_source.h"
#include "ckpt/model_checkpoint.h"
#include "core/file_util.h"
#include "train/checkpointing.h"
#include "train/preemption.h"
#include "comm/agree.h"
#include "comm/in_process_comm.h"
#include "config/config.h"
#include "core/format.h"
#include "core/parallel_layout_json.h"
#include "core/timer.h"
#include "core/file_util.h"
#include "model/layout_check.h"
#include "train/memory_check.h"
#include "train/run_outputs.h"
#include "data/tokenizer_file.h"

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

// A model source's tokenizer against the run's data (eval's check): a model
// trained on another tokenizer reads the same ids as other text. A
// safetensors file without tokenizer files beside it records none: unknown.
Status check_init_tokenizer(const ModelSourceReader& src, const std::string& run_tokenizer, const std::string& path) {
  const bool recorded = src.source().kind != ModelSourceKind::safetensors || src.tokenizer() != "bytes";
  if (!recorded) return ok_status();
  auto theirs = tokenizer_from_reference(src.tokenizer(), src.tokenizer_base(), src.tokenizer_where());
  if (!theirs) return Status::error("ckpt.init = " + path + ": " + theirs.error());
  auto ours = tokenizer_from_reference(run_tokenizer, "", "data.tokenizer");
  if (!ours) return ours.status();
  if (theirs->fingerprint() == ours->fingerprint()) return ok_status();
  return Status::error(fmt::format(
      "ckpt.init = {}: the model was trained with another tokenizer ({}, fingerprint {:016x}) than the run's data "
      "({}, fingerprint {:016x}), so its token ids would stand for other text; train on data encoded with the model's "
      "tokenizer (tera ckpt export writes it beside the weights), or leave ckpt.init out",
      path, theirs->is_bytes() ? "bytes" : fmt::format("{} tokens", theirs->vocab_size()), theirs->fingerprint(),
      ours->is_bytes() ? "bytes" : fmt::format("{} tokens", ours->vocab_size()), ours->fingerprint()));
}

// Bytes of the regular files directly in dir (a checkpoint's size).
int64_t directory_bytes(const std::string& dir) {
  int64_t total = 0;
  std::error_code ec;
  for (const auto& e : std::filesystem::directory_iterator(dir, ec)) {
    if (e.is_regular_file(ec)) total += static_cast<int64_t>(e.file_size(ec));
  }
  return total;
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
  if (local && world.rank() == 0) {
    const std::string ckpt_root = cfg.ckpt.dir.empty() ? "" : cfg.ckpt.dir;
    for (const auto& [what, dir] : {std::pair<std::string, std::string>{"out.dir", cfg.out.dir}, {"ckpt.dir", ckpt_root}}) {
      if (dir.empty() || !local) continue;
      local = probe_output_dir(dir, what);
      if (!local) break;
      if (what == "ckpt.dir" && same_file(dir, cfg.out.dir)) continue;  // one directory, one lock
      auto lock = RunLock::acquire(dir, what);
      if (!lock) {
        local = lock.status();
      } else {
        t->locks_.push_back(std::move(*lock));
      }
    }
  }
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
    const MemoryReport need = estimate_rank_memory(cfg, layout, layout.coord(world.rank()));
    std::string refusal;
    if (backend.reports_memory()) {
      const int64_t available = backend.memory_available();
      const int64_t reserved = backend.memory_reserved() + t->groups_->device_comm_reserved_bytes();
      const std::string what = std::string(backend.name) + " device memory" +
                               (reserved > 0 ? " (after " + human_bytes(reserved) + " kept for the GPU runtime, its libraries' "
                                                               "workspaces and the communication library's buffers)"
                                              : "");
      refusal = memory_refusal(need, available > 0 ? std::max<int64_t>(1, available - reserved) : 0, 1, world.rank(), what);
    } else {
      refusal = host_memory_refusal(need, options.ranks_on_node, world.rank());
    }
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
  if (g.coord.tp == 0 && g.coord.dp == 0) {
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
    if (signalled || too_bad || periodic || last) {
      Stopwatch sw;
      auto dir = save_checkpoint();
      if (!dir) return dir.status();
      const double secs = sw.seconds();
      const int64_t bytes = is_first_rank() ? directory_bytes(*dir) : 0;
      log(fmt::format("checkpoint: {} ({}, {:.2f} s, {:.0f} MB/s)", *dir, human_bytes(bytes), secs,
                      static_cast<double>(bytes) / 1e6 / std::max(secs, 1e-9)));
    }
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

Expected<std::string> Trainer::save_checkpoint() {
  CheckpointInfo info;
  info.step = next_step_;
  info.consumed_samples = next_step_ * cfg_.train.global_batch;
  info.model = cfg_.model;
  info.tokenizer = data_.tokenizer;
  const ParallelLayout& l = groups().layout;
  info.layout = layout_to_json(l);
  info.loader = data_.sampler->state(info.consumed_samples).to_json();
  info.lr_schedule = {{"lr", cfg_.train.lr}, {"min_lr", cfg_.train.min_lr}, {"warmup", cfg_.train.warmup},
                      {"steps", cfg_.train.steps}, {"next_step", next_step_}, {"next_lr", schedule_.at(next_step_)}};
  // Every random number tera draws is counter-based (Philox keyed by the
  // seed and a position), so the seed is the whole RNG state.
  info.rng = {{"kind", "philox4x32-10, counter-based"}, {"seed", cfg_.train.seed}};
  info.config_toml = run_config_to_toml(cfg_);
  return save_engine_checkpoint(*engine_, std::move(info), checkpoint_root(), cfg_.ckpt.keep);
}

Status Trainer::claim_checkpoint_root(bool start_over) {
  // A fresh run into a directory that holds checkpoints would mix two runs:
  // retention and `latest` would follow the other run's steps.
  namespace fs = std::filesystem;
  const std::string root = checkpoint_root();
  const auto found = list_checkpoints(root);
  if (found.empty()) return ok_status();
  const std::string key = cfg_.ckpt.dir.empty() ? "out.dir/checkpoints" : "ckpt.dir";
  if (!start_over) {
    return Status::error(fmt::format(
        "{} {} holds {} checkpoint(s) of an earlier run (newest {}); continue that run with --resume auto, start "
        "over with --start-over (deletes them), or give this run another {}",
        key, root, found.size(), found.front().second, key));
  }
  std::error_code ec;
  for (const auto& [step, name] : found) {
    fs::remove_all(fs::path(root) / name, ec);
    if (ec) return Status::error(fmt::format("--start-over: cannot delete {}/{} ({})", root, name, ec.message()));
  }
  fs::remove(fs::path(root) / "latest", ec);
  log(fmt::format("--start-over: deleted {} checkpoint(s) of the earlier run in {}", found.size(), root));
  return ok_status();
}

Status Trainer::start(const StartOptions& options) {
  Communicator& world = *groups().world;
  const std::string& resume = options.resume;
  change_schedule_ = options.change_schedule;
  Stopwatch sw;
  std::string dir;
  if (resume.empty()) {
    const Status st = is_first_rank() ? claim_checkpoint_root(options.start_over) : ok_status();
    TERA_RETURN_IF_ERROR(agree(world, st, "another rank (rank 0) refused the checkpoint directory (see its message)"));
  } else if (options.start_over) {
    return Status::error("--start-over and --resume contradict each other: --start-over deletes the checkpoints "
                         "--resume would continue; pass one of them");
  }
  if (resume.empty() && options.discard_newer) {
    return Status::error("--discard-newer goes with --resume DIR: it deletes the checkpoints newer than the one resumed");
  }
  int64_t resume_step = -1;  // rank 0: the step of the checkpoint resumed
  if (resume == "auto") {
    // Rank 0 picks (so every rank loads the same one) and tells the others the step.
    double step = -1;
    Status st = ok_status();
    if (is_first_rank()) {
      std::vector<std::string> skipped;
      auto found = find_latest_valid(checkpoint_root(), &skipped);
      for (const auto& why : skipped) log("warning: skipping invalid checkpoint: " + why);
      if (!found) {
        st = found.status();
      } else if (*found) {
        step = static_cast<double>((*found)->info.step);
      } else {
        log("--resume auto: no checkpoint under " + checkpoint_root() + "; starting from step 0");
      }
    }
    TERA_RETURN_IF_ERROR(agree(world, st, "another rank (rank 0) could not choose a checkpoint (see its message)"));
    step = world.all_reduce_max(step);
    if (step >= 0) dir = (std::filesystem::path(checkpoint_root()) / step_dir_name(static_cast<int64_t>(step))).string();
    resume_step = static_cast<int64_t>(step);
  } else if (!resume.empty()) {
    dir = resume;
    Status st = ok_status();
    if (is_first_rank()) {
      auto info = read_checkpoint_info(dir);
      st = info ? verify_checkpoint(dir, *info) : info.status();
      if (info) resume_step = info->step;
    }
    TERA_RETURN_IF_ERROR(agree(world, st, "another rank (rank 0) found the checkpoint invalid (see its message)"));
  }
  // What this run would replace: another run's final weights, or a later timeline.
  {
    Status st = ok_status();
    if (is_first_rank()) {
      st = dir.empty() ? claim_final_dir(cfg_, options.start_over, resume == "auto")
                       : check_newer_than_resumed(cfg_, resume_step, options.discard_newer, resume == "auto",
                                                  [this](const std::string& m) { log(m); });
    }
    TERA_RETURN_IF_ERROR(agree(world, st, "another rank (rank 0) refused the run's outputs (see its message)"));
  }
  Status st = ok_status();
  if (!dir.empty()) {
    st = resume_from(dir);
  } else if (!cfg_.ckpt.init.empty()) {
    st = init_weights_from(cfg_.ckpt.init);
  }
  // Loading is per rank: a failure anywhere stops everyone.
  TERA_RETURN_IF_ERROR(agree(world, st, "another rank could not load the checkpoint (see its message)"));
  if (!dir.empty()) {
    resumed_ = true;
    if (!cfg_.ckpt.init.empty()) {
      log("note: ckpt.init = " + cfg_.ckpt.init + " is not read: the run continues from its checkpoint (ckpt.init "
          "only starts a fresh run)");
    }
    const double secs = sw.seconds();
    const int64_t bytes = is_first_rank() ? directory_bytes(dir) : 0;
    log(fmt::format("resumed from {} at step {} ({}, {:.2f} s, {:.0f} MB/s)", dir, next_step_, human_bytes(bytes), secs,
                    static_cast<double>(bytes) / 1e6 / std::max(secs, 1e-9)));
  }
  return ok_status();
}

Status Trainer::resume_from(const std::string& dir) {
  auto reader = CheckpointReader::open(dir, /*verify_crc=*/false);  // rank 0 checked the CRCs
  if (!reader) return reader.status();
  const CheckpointInfo& info = reader->info();
  if (const std::string d = model_config_diff(info.model, cfg_.model); !d.empty()) {
    return Status::error(dir + ": the checkpoint is of another model (" + d + "); resume with its model settings");
  }
  if (info.tokenizer != data_.tokenizer) {
    return Status::error(dir + ": the checkpoint was trained with another tokenizer than data.tokenizer / the shards' one");
  }
  TERA_RETURN_IF_ERROR(check_schedule(info, dir));
  if (info.step > cfg_.train.steps) {
    return Status::error(dir + fmt::format(": the checkpoint is at step {}, past train.steps = {}; raise train.steps "
                                           "to continue training",
                                           info.step, cfg_.train.steps));
  }
  auto state = LoaderState::from_json(info.loader, dir + "/meta.json loader");
  if (!state) return state.status();
  auto next = data_.sampler->resume(*state, dir);
  if (!next) return next.status();
  if (*next != info.step * cfg_.train.global_batch) {
    return Status::error(dir + fmt::format(": the checkpoint consumed {} samples in {} steps, but train.global_batch "
                                           "= {}; resume with the global batch it was written with ({})",
                                           *next, info.step, cfg_.train.global_batch,
                                           info.step > 0 ? *next / info.step : 0));
  }
  TERA_RETURN_IF_ERROR(load_engine_checkpoint(*engine_, *reader, /*with_optimizer=*/true));
  next_step_ = info.step;
  return ok_status();
}

Status Trainer::check_schedule(const CheckpointInfo& info, const std::string& dir) {
  // The learning-rate schedule is a function of (lr, min_lr, warmup, steps),
  // and the update one of AdamW's hyper-parameters and the clip: changing
  // any on resume changes the run from this step on.
  std::string changes;
  auto compare = [&](const nlohmann::json& was, const char* key, double now) {
    if (!was.is_object() || !was.contains(key) || !was[key].is_number()) return;  // not recorded (older checkpoints)
    const double before = was[key].get<double>();
    const bool same = std::abs(before - now) <= 1e-6 * std::max(std::abs(before), std::abs(now));
    if (!same) changes += fmt::format("{}train.{} {:g} -> {:g}", changes.empty() ? "" : ", ", key, before, now);
  };
  const nlohmann::json& schedule = info.lr_schedule;
  compare(schedule, "steps", static_cast<double>(cfg_.train.steps));
  compare(schedule, "lr", cfg_.train.lr);
  compare(schedule, "min_lr", cfg_.train.min_lr);
  compare(schedule, "warmup", static_cast<double>(cfg_.train.warmup));
  // The optimizer's, from the run config the checkpoint records.
  if (auto ran = parse_run_config(info.config_toml, dir + "/meta.json config_toml", {}, /*check_files=*/false)) {
    const nlohmann::json optimizer = {{"weight_decay", ran->train.adamw.weight_decay}, {"beta1", ran->train.adamw.beta1},
                                      {"beta2", ran->train.adamw.beta2},               {"eps", ran->train.adamw.eps},
                                      {"clip", ran->train.clip}};
    compare(optimizer, "weight_decay", cfg_.train.adamw.weight_decay);
    compare(optimizer, "beta1", cfg_.train.adamw.beta1);
    compare(optimizer, "beta2", cfg_.train.adamw.beta2);
    compare(optimizer, "eps", cfg_.train.adamw.eps);
    compare(optimizer, "clip", cfg_.train.clip);
  }
  if (changes.empty()) return ok_status();
  if (!change_schedule_) {
    return Status::error(dir + ": the learning-rate schedule or the optimizer differs from the checkpoint's (" + changes +
                         "); resume with the same settings, or pass --change-schedule to continue with the new ones");
  }
  log("--change-schedule: the run continues with " + changes);
  return ok_status();
}

Status Trainer::init_weights_from(const std::string& path) {
  // Any model source (ckpt/model_source.h); a safetensors file is read as the
  // run's model, every tensor's shape checked.
  auto source = resolve_model_source(path);
  if (!source) return Status::error("ckpt.init = " + path + ": " + source.error());
  ModelSourceOptions opt;
  opt.model = &cfg_.model;
  opt.verify_crc = is_first_rank();  // one rank checks a checkpoint's CRCs (start() shares its verdict); all read
  auto src = ModelSourceReader::open(*source, opt);
  if (!src) return Status::error("ckpt.init = " + path + ": " + src.error());
  if (const std::string d = model_config_diff(src->model(), cfg_.model); !d.empty()) {
    return Status::error("ckpt.init = " + path + ": another model (" + d + ")");
  }
  TERA_RETURN_IF_ERROR(check_init_tokenizer(*src, data_.tokenizer, path));
  if (source->kind == ModelSourceKind::checkpoint_root) {
    log("ckpt.init = " + path + ": its latest valid checkpoint, " + source->path);
  }
  if (src->checkpoint() != nullptr) return load_engine_checkpoint(*engine_, *src->checkpoint(), /*with_optimizer=*/false);
  return load_engine_weights(*engine_, [&](const ParamInfo& p, float* out) {
    Status st = src->read(p, out);
    return st ? st : Status::error("ckpt.init = " + path + ": " + st.message());
  });
}

std::vector<float> Trainer::gather_parameters() { return engine_->gather_parameters(); }

Status Trainer::save_final() {
  const auto tensors = engine_->gather_global_parameters();
  Status st = ok_status();
  if (is_first_rank()) {
    // Like a checkpoint, the final weights are only ever finite.
    for (const auto& [info, data] : tensors) {
      const auto bad = std::count_if(data.begin(), data.end(), [](float x) { return !std::isfinite(x); });
      if (bad > 0 && st) {
        st = Status::error(fmt::format("not writing the final weights: {} values of {} are not finite; resume from "
                                       "the last good checkpoint with a lower train.lr",
                                       bad, info->name));
      }
    }
  }
  if (is_first_rank() && st) {
    CheckpointMeta meta;
    meta.model = cfg_.model;
    meta.step = next_step_;
    meta.tokenizer = data_.tokenizer;
    meta.extra = {{"config_toml", run_config_to_toml(cfg_)}, {"micro_batch", cfg_.parallel.micro_batch}};
    const std::string dir = (std::filesystem::path(cfg_.out.dir) / "final").string();
    std::vector<NamedTensor> named;
    for (const auto& [info, data] : tensors) named.push_back({info->name, info->shape, data.data()});
    st = save_model_checkpoint(dir, named, meta);
  }
  return agree(*groups().world, st, "the first rank could not write the checkpoint (see its message)");
}

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
