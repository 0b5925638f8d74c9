// Model sources: resolve a user's path to a kind, then read global tensors.
#include "ckpt/model_source.h"

#include <cstring>
#include <filesystem>
#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "ckpt/hf_llama.h"
#include "ckpt/model_checkpoint.h"
#include "core/file_util.h"
#include "partition/parallel_layout_json.h"

namespace tera {

namespace fs = std::filesystem;

namespace {

constexpr const char* kAccepted =
    "name a training checkpoint (ckpt.dir/step-N), a ckpt.dir (its latest valid checkpoint), a tera-model directory "
    "(out.dir/final, ckpt import's output) or a .safetensors file";

// The "format" a meta.json declares ("" when unreadable): which reader's
// message to show when neither accepts it.
std::string declared_format(const std::string& dir) {
  auto bytes = read_regular_file((fs::path(dir) / "meta.json").string(), "meta.json", uint64_t{1} << 30);
  if (!bytes) return "";
  const auto j = nlohmann::json::parse(bytes->begin(), bytes->end(), nullptr, false);
  if (!j.is_object() || !j.contains("format") || !j["format"].is_string()) return "";
  return j["format"].get<std::string>();
}

// Files that sit beside or inside a model but are not its weights, named
// with what to pass instead.
Status refuse_known_non_weights(const std::string& path) {
  const fs::path p(path);
  const std::string name = p.filename().string(), parent = p.has_parent_path() ? p.parent_path().string() : ".";
  std::string what;
  if (name == "latest" && !list_checkpoints(parent).empty()) {
    what = "a ckpt.dir's pointer to its newest checkpoint; pass the ckpt.dir itself (" + parent + ")";
  } else if (name == "meta.json") {
    what = "a checkpoint's metadata; pass the directory that holds it (" + parent + ")";
  } else if (name == "config.json" || name == "vocab.json" || name == "merges.txt" || name == "tokenizer.json" ||
             name == "manifest.json") {
    what = "a configuration or tokenizer file, not weights; pass the .safetensors file beside it";
  }
  if (what.empty()) return ok_status();
  return Status::error(path + ": not a model: it is " + what);
}

}  // namespace

const char* model_source_kind_name(ModelSourceKind k) {
  switch (k) {
    case ModelSourceKind::checkpoint: return "training checkpoint";
    case ModelSourceKind::checkpoint_root: return "ckpt.dir";
    case ModelSourceKind::model_dir: return "tera-model directory";
    case ModelSourceKind::safetensors: return "safetensors file";
  }
  return "?";
}

Expected<ModelSource> resolve_model_source(const std::string& path) {
  ModelSource src;
  src.given = path;
  src.path = path;
  std::error_code ec;
  const fs::file_status st = fs::status(path, ec);
  if (path.empty() || st.type() == fs::file_type::not_found) {
    return Status::error((path.empty() ? std::string("''") : path) + ": not a tera checkpoint (not found); " + kAccepted);
  }
  if (st.type() != fs::file_type::directory) {
    if (Status s = refuse_known_non_weights(path); !s) return s;
    src.kind = ModelSourceKind::safetensors;  // SafetensorsFile::open refuses what is not a regular file
    return src;
  }
  if (fs::exists(fs::path(path) / "meta.json", ec)) {
    if (read_checkpoint_info(path)) {
      src.kind = ModelSourceKind::checkpoint;
      return src;
    }
    auto meta = read_checkpoint_meta(path);
    if (meta) {
      src.kind = ModelSourceKind::model_dir;
      return src;
    }
    if (declared_format(path) == kCheckpointFormat) return read_checkpoint_info(path).status();
    return meta.status();
  }
  if (list_checkpoints(path).empty()) {
    return Status::error(path + ": not a tera checkpoint (a directory with no meta.json and no step-N checkpoints); " +
                         kAccepted);
  }
  auto listed = list_checkpoints(path);
  auto found = find_latest_valid(path, &src.skipped);
  // A live run replaced them while they were checked: look again (bounded).
  for (int again = 0; again < 3 && !found && list_checkpoints(path) != listed; ++again) {
    listed = list_checkpoints(path);
    src.skipped.clear();
    found = find_latest_valid(path, &src.skipped);
  }
  if (!found) return found.status();
  src.kind = ModelSourceKind::checkpoint_root;
  src.path = (*found)->dir;
  return src;
}

Expected<ModelSourceReader> ModelSourceReader::open(const ModelSource& source, const ModelSourceOptions& opt) {
  ModelSourceReader r;
  r.source_ = source;
  Status st = ok_status();
  switch (source.kind) {
    case ModelSourceKind::checkpoint:
    case ModelSourceKind::checkpoint_root: st = r.open_checkpoint(opt); break;
    case ModelSourceKind::model_dir: st = r.open_model_dir(); break;
    case ModelSourceKind::safetensors: st = r.open_safetensors(opt); break;
    default: st = Status::error(source.given + ": unknown source kind");
  }
  if (!st) return st;
  return r;
}

// A training checkpoint, or a ckpt.dir's newest valid one.
Status ModelSourceReader::open_checkpoint(const ModelSourceOptions& opt) {
  const ModelSource source = source_;  // as asked (source_ follows a superseded checkpoint)
  auto reader = CheckpointReader::open(source.path, opt.verify_crc);
  // A live run's retention can delete the checkpoint chosen before it
  // is read (ckpt.keep = 1, a checkpoint every step): while a newer one
  // has appeared, read the newest (bounded); if that one is invalid
  // itself, the newest valid one.
  if (!reader && source.kind == ModelSourceKind::checkpoint_root) {
    for (int again = 0; again < 20 && !reader; ++again) {
      const auto all = list_checkpoints(source.given);
      if (all.empty() || fs::path(source_.path).filename() == all.front().second) break;  // not superseded
      source_.path = (fs::path(source.given) / all.front().second).string();
      reader = CheckpointReader::open(source_.path, opt.verify_crc);
    }
    if (!reader) {
      auto valid = resolve_model_source(source.given);
      if (valid && valid->path != source_.path) {
        source_ = *valid;
        reader = CheckpointReader::open(source_.path, opt.verify_crc);
      }
    }
  }
  if (!reader) return reader.status();
  const CheckpointInfo& info = reader->info();
  spec_ = std::make_unique<ModelSpec>(info.model);
  step_ = info.step;
  tokenizer_ = info.tokenizer;
  tokenizer_base_ = source_.path;
  tokenizer_where_ = (fs::path(source_.path) / "meta.json").string();
  if (info.layout.contains("micro_batch")) {  // checked by read_checkpoint_info; not recorded before 2026-12-02
    auto layout = layout_from_json(info.layout, tokenizer_where_ + " 'layout'");
    if (!layout) return layout.status();
    micro_batch_ = layout->micro_batch;
  }
  ckpt_.emplace(std::move(*reader));
  return ok_status();
}

// A tera-model directory: meta.json and model.safetensors, its checksum checked.
Status ModelSourceReader::open_model_dir() {
  const ModelSource& source = source_;
  auto meta = read_checkpoint_meta(source.path);
  if (!meta) return meta.status();
  const std::string path = (fs::path(source.path) / "model.safetensors").string();
  auto file = SafetensorsFile::open(path);
  if (!file) return file.status();
  if (!meta->tensors_crc32) {
    return Status::error((fs::path(source.path) / "meta.json").string() +
                         ": 'tensors' must hold the tensor file name and its crc32");
  }
  if (*meta->tensors_crc32 != file->crc32()) {
    return Status::error(path + fmt::format(": checksum mismatch (file {:08x}, meta.json {:08x}); the file is "
                                            "corrupt or was replaced",
                                            file->crc32(), *meta->tensors_crc32));
  }
  spec_ = std::make_unique<ModelSpec>(meta->model);
  step_ = meta->step;
  tokenizer_ = meta->tokenizer;
  tokenizer_base_ = source.path;
  tokenizer_where_ = (fs::path(source.path) / "meta.json").string();
  if (meta->extra.is_object() && meta->extra.contains("micro_batch") && meta->extra["micro_batch"].is_number_integer()) {
    micro_batch_ = meta->extra["micro_batch"].get<int64_t>();
  }
  file_.emplace(std::move(*file));
  return ok_status();
}

// A safetensors file with Hugging Face (GPT-2, Llama) or tera names.
Status ModelSourceReader::open_safetensors(const ModelSourceOptions& opt) {
  const ModelSource& source = source_;
  auto file = SafetensorsFile::open(source.path);
  if (!file) return file.status();
  hf_llama_ = is_hf_llama_file(*file);
  if (hf_llama_) {
    // Llama's config.json describes the model fully: a run reading it
    // (ckpt.init) must be that model, but for the context length, which
    // no Llama weight depends on.
    auto model = infer_hf_llama_config(*file);
    if (!model) return model.status();
    if (opt.model != nullptr) {
      ModelConfig file_model = *model;
      file_model.seq_len = opt.model->seq_len;
      file_model.vocab_align = opt.model->vocab_align;
      if (const std::string d = model_config_diff(file_model, *opt.model); !d.empty()) {
        return Status::error(source.path + ": another model (" + d + "; the checkpoint's values are its config.json's)");
      }
    }
    spec_ = std::make_unique<ModelSpec>(opt.model != nullptr ? *opt.model : *model);
  } else if (opt.model != nullptr) {
    spec_ = std::make_unique<ModelSpec>(*opt.model);
  } else {
    auto model = infer_hf_gpt2_config(*file, opt.heads);
    if (!model) return model.status();
    spec_ = std::make_unique<ModelSpec>(*model);
  }
  // GPT-2's tokenizer files beside the weights (what ckpt export writes), else byte-level.
  const fs::path beside = fs::path(source.path).has_parent_path() ? fs::path(source.path).parent_path() : fs::path(".");
  std::error_code ec;
  const bool gpt2 = fs::exists(beside / "vocab.json", ec) || fs::exists(beside / "merges.txt", ec);
  tokenizer_ = gpt2 ? "." : "bytes";  // "." resolves to the directory beside the file
  tokenizer_base_ = beside.string();
  tokenizer_where_ = source.path;
  file_.emplace(std::move(*file));
  return ok_status();
}

Status ModelSourceReader::read(const ParamInfo& param, float* out) const {
  if (ckpt_) return ckpt_->read_global(StateKind::param, param, out);
  if (source_.kind == ModelSourceKind::model_dir) return read_named_tensor(*file_, param, out);
  if (hf_llama_) return read_hf_llama_tensor(*file_, spec_->config(), param, out);
  return read_hf_or_tera_tensor(*file_, param, out);
}

Expected<std::vector<GlobalTensor>> ModelSourceReader::read_all() const {
  std::vector<GlobalTensor> out;
  out.reserve(spec_->params().size());
  for (const ParamInfo& p : spec_->params()) {
    GlobalTensor t{p.name, p.shape, std::vector<float>(static_cast<size_t>(numel(p.shape)))};
    TERA_RETURN_IF_ERROR(read(p, t.data.data()));
    out.push_back(std::move(t));
  }
  return out;
}

Status ModelSourceReader::read_into(const ParamTable& table, float* params) const {
  TERA_ASSERT(table.tp() == 1, "read a tensor-parallel table's slices with read() and ParamTable::global_index");
  Status result;
  table.for_each([&](const ParamEntry& e) {
    if (!result) return;
    result = read(*e.info, params + e.offset);
    std::memset(params + e.offset + numel(e.info->shape), 0,
                static_cast<size_t>(e.count - numel(e.info->shape)) * sizeof(float));
  });
  return result;
}

}  // namespace tera
