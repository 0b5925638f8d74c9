// The run's checkpoint lifecycle (Trainer's, see trainer.h): choosing what a
// start continues from (a checkpoint, ckpt.init or nothing) and claiming the
// outputs it would replace, resuming (the model, the data position and the
// schedule checked against the run), periodic and final saves. The state
// itself is saved and loaded by train/checkpointing.h.
#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fmt/format.h>

#include "ckpt/model_checkpoint.h"
#include "ckpt/model_source.h"
#include "comm/agree.h"
#include "config/config.h"
#include "core/format.h"
#include "partition/parallel_layout_json.h"
#include "core/timer.h"
#include "data/tokenizer_file.h"
#include "train/checkpointing.h"
#include "train/run_outputs.h"
#include "train/trainer.h"

namespace tera {

namespace {

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

Status Trainer::checkpoint_and_log() {
  Stopwatch sw;
  auto dir = save_checkpoint();
  if (!dir) return dir.status();
  const double secs = sw.seconds();
  const int64_t bytes = is_first_rank() ? directory_bytes(*dir) : 0;
  log(fmt::format("checkpoint: {} ({}, {:.2f} s, {:.0f} MB/s)", *dir, human_bytes(bytes), secs,
                  static_cast<double>(bytes) / 1e6 / std::max(secs, 1e-9)));
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
  change_schedule_ = options.change_schedule;
  Stopwatch sw;
  TERA_RETURN_IF_ERROR(check_start(options));
  auto point = find_resume_point(options.resume);
  if (!point) return point.status();
  const std::string& dir = point->dir;
  TERA_RETURN_IF_ERROR(claim_outputs(*point, options));
  Status st = ok_status();
  if (!dir.empty()) {
    st = resume_from(dir);
  } else if (!cfg_.ckpt.init.empty()) {
    st = init_weights_from(cfg_.ckpt.init);
  }
  // Loading is per rank: a failure anywhere stops everyone.
  TERA_RETURN_IF_ERROR(agree(*groups().world, st, "another rank could not load the checkpoint (see its message)"));
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

Status Trainer::check_start(const StartOptions& options) {
  if (options.resume.empty()) {
    const Status st = is_first_rank() ? claim_checkpoint_root(options.start_over) : ok_status();
    TERA_RETURN_IF_ERROR(agree(*groups().world, st,
                               "another rank (rank 0) refused the checkpoint directory (see its message)"));
  } else if (options.start_over) {
    return Status::error("--start-over and --resume contradict each other: --start-over deletes the checkpoints "
                         "--resume would continue; pass one of them");
  }
  if (options.resume.empty() && options.discard_newer) {
    return Status::error("--discard-newer goes with --resume DIR: it deletes the checkpoints newer than the one resumed");
  }
  return ok_status();
}

Expected<Trainer::ResumePoint> Trainer::find_resume_point(const std::string& resume) {
  Communicator& world = *groups().world;
  ResumePoint point;
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
    if (step >= 0) {
      point.dir = (std::filesystem::path(checkpoint_root()) / step_dir_name(static_cast<int64_t>(step))).string();
    }
    point.step = static_cast<int64_t>(step);
  } else if (!resume.empty()) {
    point.dir = resume;
    Status st = ok_status();
    if (is_first_rank()) {
      auto info = read_checkpoint_info(point.dir);
      st = info ? verify_checkpoint(point.dir, *info) : info.status();
      if (info) point.step = info->step;
    }
    TERA_RETURN_IF_ERROR(agree(world, st, "another rank (rank 0) found the checkpoint invalid (see its message)"));
  }
  point.automatic = resume == "auto";
  return point;
}

Status Trainer::claim_outputs(const ResumePoint& point, const StartOptions& options) {
  // What this run would replace: another run's final weights, or a later timeline.
  Status st = ok_status();
  if (is_first_rank()) {
    st = point.dir.empty() ? claim_final_dir(cfg_, options.start_over, point.automatic)
                           : check_newer_than_resumed(cfg_, point.step, options.discard_newer, point.automatic,
                                                      [this](const std::string& m) { log(m); });
  }
  return agree(*groups().world, st, "another rank (rank 0) refused the run's outputs (see its message)");
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

}  // namespace tera
