// A run's outputs before any work; see run_outputs.h.
#include "train/run_outputs.h"

#include <filesystem>
#include <fmt/format.h>

#include "ckpt/checkpoint.h"
#include "ckpt/model_checkpoint.h"
#include "core/file_util.h"
#include "core/path_overlap.h"

namespace tera {

namespace fs = std::filesystem;

namespace {

// The entries a run writes or deletes in out.dir (the final weights, their
// staging and set-aside copies, the lock) and in the checkpoint root.
const std::vector<std::string> kOutDirEntries = {"final", "final.tmp.*", "final.old.*", ".tera.lock"};
const std::vector<std::string> kCheckpointEntries = {"step-*", ".tmp-step-*", ".old-step-*", "latest"};

std::string checkpoint_root_key(const RunConfig& cfg) { return cfg.ckpt.dir.empty() ? "out.dir/checkpoints" : "ckpt.dir"; }

std::string final_dir(const RunConfig& cfg) { return (fs::path(cfg.out.dir) / "final").string(); }

}  // namespace

std::string checkpoint_root(const RunConfig& cfg) {
  return cfg.ckpt.dir.empty() ? (fs::path(cfg.out.dir) / "checkpoints").string() : cfg.ckpt.dir;
}

Status check_run_paths(const RunConfig& cfg, const std::string& config, const std::string& metrics,
                       const std::string& trace) {
  for (const auto& [key, dir] : {std::pair<const char*, std::string>{"out.dir", cfg.out.dir}, {"ckpt.dir", cfg.ckpt.dir}}) {
    std::error_code ec;
    if (dir.empty()) continue;
    const fs::path c = fs::weakly_canonical(fs::absolute(dir, ec), ec);
    if (!ec && c == c.root_path()) {
      return Status::error(fmt::format("{}: {} = \"{}\" is the root directory; give the run's outputs a directory of "
                                       "their own (e.g. {} = \"out/run1\")",
                                       cfg.source, key, dir, key));
    }
  }
  std::vector<InputPath> inputs = {
      {config, "--config"},
      {cfg.data.train, "data.train"},
      {cfg.data.val, "data.val"},
      {cfg.data.tokenizer == "bytes" ? "" : cfg.data.tokenizer, "data.tokenizer"},
      {cfg.ckpt.init, "ckpt.init"},
  };
  for (const auto& [weight, prefix] : cfg.data.blend) {
    inputs.push_back({prefix + ".bin", "data.blend"});
    inputs.push_back({prefix + ".idx", "data.blend"});
  }
  const std::vector<OutputPath> outputs = {
      {metrics, "--metrics", {}},
      {trace, "--trace", {}},
      {cfg.out.dir, "out.dir", kOutDirEntries},
      {checkpoint_root(cfg), checkpoint_root_key(cfg), kCheckpointEntries},
  };
  return refuse_overlapping_paths(outputs, inputs);
}

Status claim_final_dir(const RunConfig& cfg, bool start_over, bool auto_found_nothing) {
  const std::string dir = final_dir(cfg);
  std::error_code ec;
  if (start_over || !fs::exists(fs::symlink_status(dir, ec))) return ok_status();
  auto meta = read_checkpoint_meta(dir);
  const std::string what = meta ? fmt::format("the final weights of an earlier run (step {})", meta->step)
                                : std::string("something that is not this run's (") + meta.error() + ")";
  if (auto_found_nothing) {
    return Status::error(fmt::format("out.dir {}: {} holds {}, and --resume auto found no checkpoint of it to continue "
                                     "in {}; to train afresh and replace it, pass --start-over instead of --resume "
                                     "auto, or give this run another out.dir",
                                     cfg.out.dir, dir, what, checkpoint_root(cfg)));
  }
  return Status::error(fmt::format(
      "out.dir {}: {} holds {}; continue that run with --resume auto, pass --start-over to replace it once this run's "
      "final weights are complete, or give this run another out.dir",
      cfg.out.dir, dir, what));
}

Status check_newer_than_resumed(const RunConfig& cfg, int64_t step, bool discard_newer, bool later_checkpoints_invalid,
                                const std::function<void(const std::string&)>& log) {
  const std::string root = checkpoint_root(cfg);
  std::vector<std::string> newer;
  for (const auto& [s, name] : list_checkpoints(root)) {
    if (s > step && !later_checkpoints_invalid) newer.push_back(name);
  }
  std::string final_note;
  if (auto meta = read_checkpoint_meta(final_dir(cfg)); meta && meta->step > step) {
    final_note = fmt::format("{} (step {})", final_dir(cfg), meta->step);
  }
  if (newer.empty() && final_note.empty()) return ok_status();
  std::string list;
  for (size_t i = 0; i < newer.size() && i < 5; ++i) list += (i ? ", " : "") + newer[i];
  if (newer.size() > 5) list += fmt::format(" and {} more", newer.size() - 5);
  const std::string what = (newer.empty() ? "" : fmt::format("{} {} holds {} checkpoint(s) newer than step {} ({})",
                                                             checkpoint_root_key(cfg), root, newer.size(), step, list)) +
                           (final_note.empty() ? "" : (newer.empty() ? "" : ", and ") +
                                                          fmt::format("the final weights {} are newer than step {}",
                                                                      final_note, step));
  if (!discard_newer) {
    return Status::error(what + "; resuming there would replace them. Resume the newest with --resume auto, or pass "
                                "--discard-newer to delete them and continue from step " + std::to_string(step));
  }
  std::error_code ec;
  for (const std::string& name : newer) {
    fs::remove_all(fs::path(root) / name, ec);
    if (ec) return Status::error(fmt::format("--discard-newer: cannot delete {}/{} ({})", root, name, ec.message()));
  }
  // `latest` must not name a deleted checkpoint; the next commit rewrites it.
  if (!newer.empty()) fs::remove(fs::path(root) / "latest", ec);
  log(fmt::format("--discard-newer: {}{}", newer.empty() ? "" : fmt::format("deleted {}", list),
                  final_note.empty() ? "" : (newer.empty() ? "" : "; ") + final_note + " will be replaced at the end"));
  return ok_status();
}

}  // namespace tera
