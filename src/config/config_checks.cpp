// The run config's semantic checks, after every key parsed: ranges, names
// that did not parse, the model against the runtime, the layout against the
// model and batch, and the files the run reads (config_internal.h).
#include <cmath>
#include <filesystem>
#include <fmt/format.h>

#include "config/config_internal.h"
#include "core/file_util.h"
#include "partition/layout_check.h"

namespace tera::config_internal {

Status validate(const RunConfig& c, const std::string& src, bool check_files) {
  auto err = [&](const std::string& msg) { return Status::error(src + ": " + msg); };
  if (!c.mlp_error.empty()) return err(c.mlp_error);
  if (!c.rope_scaling_error.empty()) return err(c.rope_scaling_error);
  if (!c.arch_error.empty()) return err(c.arch_error);
  if (!c.attention_error.empty()) return err(c.attention_error);
  if (Status s = validate_model_config(c.model); !s) return err(s.message());
  if (Status s = check_runtime_supports(c.model); !s) return err(s.message());
  const TrainConfig& t = c.train;
  if (t.steps <= 0) return err(fmt::format("train.steps = {} must be positive", t.steps));
  if (!c.range_error.empty()) return err(c.range_error);
  if (c.parallel.micro_batch <= 0) return err(fmt::format("train.micro_batch = {} must be positive", c.parallel.micro_batch));
  if (t.global_batch <= 0) return err(fmt::format("train.global_batch = {} must be positive", t.global_batch));
  if (!(t.lr > 0 && t.lr <= 1)) {
    return err(fmt::format("train.lr = {} must lie in (0, 1] (AdamW's step size; GPT-2 124M trains at 6e-4)", t.lr));
  }
  if (!(t.min_lr >= 0 && t.min_lr <= t.lr)) {
    return err(fmt::format("train.min_lr = {} must lie in [0, train.lr = {}]", t.min_lr, t.lr));
  }
  if (t.warmup < 0) return err(fmt::format("train.warmup = {} must be >= 0", t.warmup));
  if (!(t.adamw.weight_decay >= 0 && t.adamw.weight_decay <= 10)) {
    return err(fmt::format("train.weight_decay = {} must lie in [0, 10] (typically 0.1)", t.adamw.weight_decay));
  }
  if (!(t.adamw.beta1 >= 0 && t.adamw.beta1 < 1)) return err("train.beta1 must lie in [0, 1)");
  if (!(t.adamw.beta2 >= 0 && t.adamw.beta2 < 1)) return err("train.beta2 must lie in [0, 1)");
  if (!(t.adamw.eps > 0 && t.adamw.eps <= 1)) return err(fmt::format("train.eps = {} must lie in (0, 1] (typically 1e-8)", t.adamw.eps));
  if (!(t.clip >= 0)) return err(fmt::format("train.clip = {} must be >= 0 (0 disables clipping)", t.clip));
  if (t.eval_every < 0) return err("train.eval_every must be >= 0 (0: evaluate at the end only)");
  if (t.eval_sequences <= 0) return err("train.eval_sequences must be positive");
  if (c.train.backend.empty()) return err("train.backend is empty; name a kernel backend (\"cpu\", `tera version` lists them)");
  if (const std::string& d = c.train.device_comm; d != "auto" && d != "nccl" && d != "rccl" && d != "mpi" && d != "staged") {
    return err("train.device_comm = \"" + d + "\" is not one of \"auto\", \"nccl\", \"rccl\", \"mpi\", \"staged\"");
  }
  if (!c.precision_error.empty()) {
    return err("train.precision = \"" + c.precision_error + "\" is not one of \"fp32\", \"bf16\"");
  }
  if (!c.recompute_name_error.empty()) {
    return err("train.recompute = \"" + c.recompute_name_error + "\" is not one of \"none\", \"full\"");
  }
  if (c.parallel.recompute == Recompute::selective) {
    return err("train.recompute = \"selective\" is modelled by the planner only; this runtime recomputes \"none\" or "
               "\"full\" blocks");
  }
  if (!c.data.blend.empty()) {
    if (!c.data.train.empty()) {
      return err("data.train and data.blend are both set; give one (data.blend = [[0.3, \"A\"], [0.7, \"B\"]] "
                 "trains on Megatron prefixes A and B in those shares)");
    }
    if (c.data.val.empty()) {
      return err("data.blend needs a data.val (the blend's validation data: a shard directory, a Megatron prefix or "
                 "a text file)");
    }
    for (size_t i = 0; i < c.data.blend.size(); ++i) {
      const auto& [w, prefix] = c.data.blend[i];
      if (!(w > 0) || !std::isfinite(w)) {
        return err(fmt::format("data.blend[{}]: weight {} of \"{}\" is not positive; every weight must be > 0", i, w,
                               prefix));
      }
      if (prefix.empty()) return err(fmt::format("data.blend[{}]: the prefix is empty", i));
    }
  } else if (c.data.train.empty()) {
    return err("data.train is missing; set it to a text file or a token-shard directory, "
               "e.g. data.train = \"corpus.txt\"");
  }
  if (c.data.val.empty() && !(c.data.val_fraction > 0 && c.data.val_fraction < 1)) {
    return err("data.val_fraction must lie in (0, 1) when data.val is not set");
  }
  if (check_files) {
    namespace fs = std::filesystem;
    for (const auto& [key, path] : {std::pair{"data.train", c.data.train}, std::pair{"data.val", c.data.val},
                                    std::pair{"data.tokenizer", c.data.tokenizer}}) {
      if (path.empty() || (std::string_view(key) == "data.tokenizer" && path == "bytes")) continue;
      std::error_code ec;
      // A Megatron dataset is named by its prefix: PREFIX.idx (and .bin) exist.
      if (!fs::is_regular_file(path, ec) && !fs::is_directory(path, ec) && !fs::is_regular_file(path + ".idx", ec)) {
        return err(fmt::format("{} = \"{}\": no such file or directory; check the path (relative paths are from the "
                               "current directory)", key, path));
      }
    }
    for (size_t i = 0; i < c.data.blend.size(); ++i) {
      const std::string& prefix = c.data.blend[i].second;
      std::error_code ec;
      if (!fs::is_regular_file(prefix + ".idx", ec)) {
        return err(fmt::format("data.blend[{}] = \"{}\": no Megatron dataset there ({}.idx does not exist); a blend "
                               "names .bin/.idx prefixes (tera tokenize encode --format megatron)",
                               i, prefix, prefix));
      }
    }
  }
  if (!c.schedule_error.empty()) {
    return err("parallel.schedule = \"" + c.schedule_error +
               "\" is not one of \"gpipe\", \"1f1b\", \"interleaved\", \"zb-h1\"");
  }
  // The layout against the model and the batch; the world size is checked
  // when the run starts (train/trainer.cpp), by the same function.
  if (Status s = check_layout(c.parallel, c.model, t.global_batch, /*world=*/0); !s) return err(s.message());
  if (c.parallel.cp > 1 && c.model.attention != AttentionKind::flash) {
    return err(fmt::format("parallel.cp = {} runs ring attention over the flash kernels, and model.attention is "
                           "\"naive\"; set model.attention = \"flash\" or parallel.cp = 1", c.parallel.cp));
  }
  if (!(t.comm_timeout_s > 0)) {
    return err(fmt::format("train.comm_timeout_s = {} must be positive (seconds a communication may wait before the "
                           "job is ended as hung)", t.comm_timeout_s));
  }
  if (c.out.dir.empty()) return err("out.dir must not be empty");
  if (c.train.max_bad_steps < 1) return err("train.max_bad_steps must be at least 1 (consecutive skipped steps before stopping)");
  if (c.ckpt.every < 0) return err("ckpt.every must be >= 0 (0: checkpoint only at the end and on preemption)");
  if (c.ckpt.keep < 1) return err("ckpt.keep must be at least 1 (how many checkpoints to retain)");
  if (c.ckpt.every > 0 && c.ckpt.dir.empty()) return err("ckpt.every is set but ckpt.dir is empty; set ckpt.dir to where checkpoints go");
  return ok_status();
}

}  // namespace tera::config_internal
