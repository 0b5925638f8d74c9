// Training checkpoints; see checkpoint.h for the format and the protocol.
#include "ckpt/checkpoint.h"

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <fmt/format.h>

#include "ckpt/model_checkpoint.h"
#include "ckpt/shard_map.h"
#include "core/file_util.h"
#include "partition/parallel_layout_json.h"

namespace tera {

namespace fs = std::filesystem;
using json = nlohmann::json;

const char* state_kind_prefix(StateKind k) {
  switch (k) {
    case StateKind::param: return "param";
    case StateKind::exp_avg: return "exp_avg";
    case StateKind::exp_avg_sq: return "exp_avg_sq";
  }
  return "?";
}

std::string state_tensor_name(StateKind k, const std::string& param) {
  return std::string(state_kind_prefix(k)) + "/" + param;
}

std::string step_dir_name(int64_t step) { return fmt::format("step-{:08d}", step); }

std::string shard_file_name(int pp_stage, int tp_rank) { return fmt::format("pp{:03d}-tp{:03d}.safetensors", pp_stage, tp_rank); }

json checkpoint_info_to_json(const CheckpointInfo& info) {
  json files = json::array();
  for (const auto& f : info.files) files.push_back({{"name", f.name}, {"bytes", f.bytes}, {"crc32", f.crc32}});
  return json{{"format", kCheckpointFormat},
              {"version", kCheckpointVersion},
              {"step", info.step},
              {"consumed_samples", info.consumed_samples},
              {"model", model_config_to_json(info.model)},
              {"tokenizer", info.tokenizer},
              {"layout", info.layout},
              {"loader", info.loader},
              {"lr_schedule", info.lr_schedule},
              {"rng", info.rng},
              {"optimizer_state", info.optimizer_state},
              {"config_toml", info.config_toml},
              {"files", files}};
}

Expected<CheckpointInfo> checkpoint_info_from_json(const json& j, const std::string& what) {
  if (!j.is_object()) return Status::error(what + ": expected a JSON object");
  if (!j.contains("format") || !j["format"].is_string() || j["format"].get<std::string>() != kCheckpointFormat) {
    const std::string got = j.contains("format") ? j["format"].dump() : "none";
    if (got == std::string("\"") + kModelCheckpointFormat + "\"") {
      return Status::error(what + ": this is a weights-only tera-model directory (out.dir/final), not a training "
                                  "checkpoint; use it with ckpt.init, tera generate or tera ckpt export");
    }
    return Status::error(what + ": format is " + got + ", expected \"" + kCheckpointFormat + "\"");
  }
  if (!j.contains("version") || !j["version"].is_number_integer()) return Status::error(what + ": 'version' is missing");
  if (const int v = j["version"].get<int>(); v != kCheckpointVersion) {
    return Status::error(what + fmt::format(": checkpoint format version {} (this tera reads version {}); use the "
                                            "tera that wrote it to export the weights",
                                            v, kCheckpointVersion));
  }
  CheckpointInfo info;
  auto int_field = [&](const char* k, int64_t* out) -> Status {
    if (!j.contains(k) || !j[k].is_number_integer() || j[k].get<int64_t>() < 0) {
      return Status::error(what + ": '" + k + "' is missing or not a non-negative integer");
    }
    *out = j[k].get<int64_t>();
    return ok_status();
  };
  TERA_RETURN_IF_ERROR(int_field("step", &info.step));
  TERA_RETURN_IF_ERROR(int_field("consumed_samples", &info.consumed_samples));
  if (!j.contains("model")) return Status::error(what + ": 'model' is missing");
  auto model = model_config_from_json(j["model"], what);
  if (!model) return model.status();
  info.model = *model;
  auto obj = [&](const char* k, json* out) -> Status {
    if (!j.contains(k)) return ok_status();
    if (!j[k].is_object()) return Status::error(what + ": '" + k + "' must be an object");
    *out = j[k];
    return ok_status();
  };
  TERA_RETURN_IF_ERROR(obj("layout", &info.layout));
  if (auto layout = layout_from_json(info.layout, what + " 'layout'"); !layout) return layout.status();
  TERA_RETURN_IF_ERROR(obj("loader", &info.loader));
  TERA_RETURN_IF_ERROR(obj("lr_schedule", &info.lr_schedule));
  TERA_RETURN_IF_ERROR(obj("rng", &info.rng));
  if (j.contains("tokenizer")) {
    if (!j["tokenizer"].is_string()) return Status::error(what + ": 'tokenizer' must be a string");
    info.tokenizer = j["tokenizer"].get<std::string>();
  }
  if (j.contains("config_toml")) {
    if (!j["config_toml"].is_string()) return Status::error(what + ": 'config_toml' must be a string");
    info.config_toml = j["config_toml"].get<std::string>();
  }
  if (j.contains("optimizer_state")) {
    if (!j["optimizer_state"].is_boolean()) return Status::error(what + ": 'optimizer_state' must be true or false");
    info.optimizer_state = j["optimizer_state"].get<bool>();
  }
  if (!j.contains("files") || !j["files"].is_array() || j["files"].empty()) {
    return Status::error(what + ": 'files' must list the tensor files");
  }
  for (const auto& f : j["files"]) {
    CheckpointFile cf;
    if (!f.is_object() || !f.contains("name") || !f["name"].is_string() || !f.contains("bytes") ||
        !f["bytes"].is_number_unsigned() || !f.contains("crc32") || !f["crc32"].is_number_unsigned() ||
        f["crc32"].get<uint64_t>() > 0xffffffffull) {
      return Status::error(what + ": every entry of 'files' needs name (string), bytes and crc32 (unsigned integers)");
    }
    cf.name = f["name"].get<std::string>();
    if (cf.name.empty() || cf.name.find('/') != std::string::npos || cf.name[0] == '.') {
      return Status::error(what + ": file name '" + cf.name + "' must be a plain name inside the checkpoint");
    }
    cf.bytes = static_cast<int64_t>(f["bytes"].get<uint64_t>());
    cf.crc32 = static_cast<uint32_t>(f["crc32"].get<uint64_t>());
    info.files.push_back(cf);
  }
  return info;
}

Expected<CheckpointInfo> parse_checkpoint_meta(const uint8_t* data, size_t size, const std::string& what) {
  json j = json::parse(data, data + size, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded()) return Status::error(what + ": not valid JSON (truncated or corrupt)");
  return checkpoint_info_from_json(j, what);
}

Expected<CheckpointInfo> read_checkpoint_info(const std::string& dir) {
  const std::string path = (fs::path(dir) / "meta.json").string();
  std::error_code ec;
  if (!fs::is_directory(dir, ec)) return Status::error(dir + ": no such checkpoint directory");
  auto bytes = read_file(path);
  if (!bytes) return Status::error(dir + ": not a complete tera checkpoint (" + bytes.error() + ")");
  return parse_checkpoint_meta(bytes->data(), bytes->size(), path);
}

Status verify_checkpoint(const std::string& dir, const CheckpointInfo& info, bool check_crc) {
  for (const auto& f : info.files) {
    const std::string path = (fs::path(dir) / f.name).string();
    std::error_code ec;
    const auto size = fs::file_size(path, ec);
    if (ec) return Status::error(path + ": missing (listed in meta.json)");
    if (static_cast<int64_t>(size) != f.bytes) {
      return Status::error(path + fmt::format(": {} bytes, meta.json says {} (truncated or overwritten)", size, f.bytes));
    }
    if (check_crc) {
      auto got = crc32_file(path);
      if (!got) return got.status();
      const uint32_t crc = *got;
      if (crc != f.crc32) {
        return Status::error(path + fmt::format(": checksum mismatch (file {:08x}, meta.json {:08x}); the file is corrupt",
                                                crc, f.crc32));
      }
    }
  }
  return ok_status();
}

std::string staging_dir(const std::string& root, int64_t step) {
  return (fs::path(root) / (".tmp-" + step_dir_name(step))).string();
}

Status begin_checkpoint_dir(const std::string& root, int64_t step) {
  std::error_code ec;
  fs::create_directories(root, ec);
  if (!fs::is_directory(root, ec)) return Status::error(root + ": cannot create the checkpoint directory (ckpt.dir)");
  const std::string tmp = staging_dir(root, step);
  fs::remove_all(tmp, ec);  // a crashed earlier attempt
  if (!fs::create_directory(tmp, ec)) {
    return Status::error(tmp + ": cannot create (" + ec.message() + "); check ckpt.dir is writable");
  }
  return ok_status();
}

namespace {

Status write_text_atomic(const std::string& path, const std::string& text) {
  auto f = AtomicFile::create(path);
  if (!f) return f.status();
  TERA_RETURN_IF_ERROR(f->write(text.data(), text.size()));
  return f->commit();
}

}  // namespace

Expected<std::string> commit_checkpoint_dir(const std::string& root, const CheckpointInfo& info, int64_t keep) {
  const std::string tmp = staging_dir(root, info.step);
  TERA_RETURN_IF_ERROR(write_text_atomic((fs::path(tmp) / "meta.json").string(), checkpoint_info_to_json(info).dump(2) + "\n"));
  TERA_RETURN_IF_ERROR(fsync_dir(tmp));
  const fs::path final_dir = fs::path(root) / step_dir_name(info.step);
  std::error_code ec;
  // A step-N from an earlier attempt (a run resumed from before N): moved
  // aside, removed only once the new one is in place.
  const fs::path old = fs::path(root) / (".old-" + step_dir_name(info.step));
  fs::remove_all(old, ec);
  const bool had_old = fs::exists(final_dir, ec);
  if (had_old) {
    fs::rename(final_dir, old, ec);
    if (ec) return Status::error(final_dir.string() + ": cannot move the previous copy aside (" + ec.message() + ")");
  }
  fs::rename(tmp, final_dir, ec);
  if (ec) return Status::error(final_dir.string() + ": cannot rename the new checkpoint into place (" + ec.message() + ")");
  TERA_RETURN_IF_ERROR(fsync_dir(root));
  if (had_old) fs::remove_all(old, ec);
  TERA_RETURN_IF_ERROR(write_text_atomic((fs::path(root) / "latest").string(), step_dir_name(info.step) + "\n"));
  // Retention: the one just written and the `keep` - 1 before it stay.
  // A later step than this one can only be left from a continuation that
  // the user abandoned by resuming from an earlier checkpoint (a fresh run
  // into a directory with checkpoints is refused): it goes too, so that
  // `latest` and --resume auto name this run's newest state.
  int64_t kept = 1;
  for (const auto& [step, name] : list_checkpoints(root)) {
    if (step == info.step) continue;
    if (step < info.step && kept < keep) {
      ++kept;
      continue;
    }
    fs::remove_all(fs::path(root) / name, ec);
  }
  return final_dir.string();
}

Expected<CheckpointFile> write_shard_file(const std::string& dir, const std::string& name,
                                          const std::vector<StTensorRef>& tensors, int tp, int tp_rank,
                                          std::map<std::string, std::string> metadata) {
  metadata["format"] = kCheckpointFormat;
  metadata["tp"] = std::to_string(tp);
  metadata["tp_rank"] = std::to_string(tp_rank);
  const std::string path = (fs::path(dir) / name).string();
  auto crc = write_safetensors(path, tensors, metadata);
  if (!crc) return crc.status();
  std::error_code ec;
  const auto size = fs::file_size(path, ec);
  if (ec) return Status::error(path + ": cannot stat after writing (" + ec.message() + ")");
  return CheckpointFile{name, static_cast<int64_t>(size), *crc};
}

std::vector<std::pair<int64_t, std::string>> list_checkpoints(const std::string& root) {
  std::vector<std::pair<int64_t, std::string>> out;
  std::error_code ec;
  if (!fs::is_directory(root, ec)) return out;
  for (const auto& e : fs::directory_iterator(root, ec)) {
    const std::string n = e.path().filename().string();
    if (n.size() != 13 || n.rfind("step-", 0) != 0 || !e.is_directory()) continue;
    if (!std::all_of(n.begin() + 5, n.end(), [](char c) { return c >= '0' && c <= '9'; })) continue;
    out.emplace_back(std::stoll(n.substr(5)), n);
  }
  std::sort(out.begin(), out.end(), [](const auto& a, const auto& b) { return a.first > b.first; });
  return out;
}

Expected<std::optional<FoundCheckpoint>> find_latest_valid(const std::string& root, std::vector<std::string>* skipped) {
  const auto all = list_checkpoints(root);
  for (const auto& [step, name] : all) {
    const std::string dir = (fs::path(root) / name).string();
    auto info = read_checkpoint_info(dir);
    Status st = info ? verify_checkpoint(dir, *info) : info.status();
    if (st && info->step != step) st = Status::error(dir + fmt::format(": meta.json says step {}", info->step));
    if (!st) {
      if (skipped != nullptr) skipped->push_back(st.message());
      continue;
    }
    return std::optional<FoundCheckpoint>(FoundCheckpoint{dir, std::move(*info)});
  }
  if (!all.empty()) {
    return Status::error(root + fmt::format(": none of the {} checkpoints is valid (newest first: {}); "
                                            "pass --resume DIR for a specific one or start a new ckpt.dir",
                                            all.size(), skipped && !skipped->empty() ? skipped->front() : "?"));
  }
  return std::optional<FoundCheckpoint>();
}

Expected<CheckpointReader> CheckpointReader::open(const std::string& dir, bool verify_crc) {
  auto info = read_checkpoint_info(dir);
  if (!info) return info.status();
  TERA_RETURN_IF_ERROR(verify_checkpoint(dir, *info, verify_crc));
  CheckpointReader r;
  r.dir_ = dir;
  r.info_ = std::move(*info);
  r.spec_ = std::make_unique<ModelSpec>(r.info_.model);
  for (const auto& f : r.info_.files) {
    const std::string path = (fs::path(dir) / f.name).string();
    auto st = SafetensorsFile::open(path);
    if (!st) return st.status();
    auto meta_int = [&](const char* key, int* out) -> Status {
      auto it = st->metadata().find(key);
      int v = -1;
      if (it != st->metadata().end()) {
        try {
          v = std::stoi(it->second);
        } catch (...) {
          v = -1;
        }
      }
      if (v < 0 || v > 1 << 20) return Status::error(path + ": metadata '" + key + "' is missing or not a small integer");
      *out = v;
      return ok_status();
    };
    int tp = 0, tp_rank = 0;
    TERA_RETURN_IF_ERROR(meta_int("tp", &tp));
    TERA_RETURN_IF_ERROR(meta_int("tp_rank", &tp_rank));
    if (tp < 1 || tp_rank >= tp) return Status::error(path + fmt::format(": tp_rank {} of tp {} is impossible", tp_rank, tp));
    if (r.spec_->config().heads % tp != 0 || r.spec_->config().hidden % tp != 0) {
      return Status::error(path + fmt::format(": written with tp {}, which does not divide the model's heads", tp));
    }
    r.files_.push_back(std::move(*st));
    r.file_tp_.push_back(tp);
    r.file_tp_rank_.push_back(tp_rank);
    auto& table = r.tables_[{tp, tp_rank}];
    if (!table) table = std::make_unique<ParamTable>(*r.spec_, ArenaLayout::kAlignFloats, tp, tp_rank);
  }
  // Index after every file moved into place (tensor pointers stay valid: the
  // vector of refs belongs to each SafetensorsFile).
  for (size_t i = 0; i < r.files_.size(); ++i) {
    for (const StTensorRef& t : r.files_[i].tensors()) r.slices_.emplace(t.name, Slice{i, &t});
  }
  return r;
}

bool CheckpointReader::has(StateKind kind, const std::string& param) const {
  return slices_.count(state_tensor_name(kind, param)) > 0;
}

Status CheckpointReader::read_global(StateKind kind, const ParamInfo& param, float* out) const {
  const std::string name = state_tensor_name(kind, param.name);
  const int64_t n = numel(param.shape);
  auto range = slices_.equal_range(name);
  if (range.first == range.second) {
    return Status::error(dir_ + ": tensor '" + name + "' is in no file of the checkpoint");
  }
  std::vector<uint8_t> covered;
  for (auto it = range.first; it != range.second; ++it) {
    const Slice& s = it->second;
    const SafetensorsFile& file = files_[s.file];
    const ParamTable& table = *tables_.at({file_tp_[s.file], file_tp_rank_[s.file]});
    const ParamEntry* e = table.find(param.name);
    if (e == nullptr) return Status::error(file.path() + ": holds '" + name + "', which this model does not have");
    if (s.tensor->dtype != "F32" || s.tensor->shape != e->local_shape) {
      return Status::error(file.path() + ": '" + name + "' is " + s.tensor->dtype + " " + shape_str(s.tensor->shape) +
                           ", expected F32 " + shape_str(e->local_shape) + " for its tp slice");
    }
    const ShardMap map(table);
    if (map.whole(*e)) {  // one slice holds it all
      map.gather(*e, s.tensor->data, out);
      return ok_status();
    }
    if (covered.empty()) covered.assign(static_cast<size_t>(n), 0);
    map.gather(*e, s.tensor->data, out, covered.data());
  }
  if (std::find(covered.begin(), covered.end(), 0) != covered.end()) {
    return Status::error(dir_ + ": the slices of '" + name + "' do not cover the whole tensor (a shard file is missing)");
  }
  return ok_status();
}

std::string model_config_diff(const ModelConfig& ckpt, const ModelConfig& run) {
  std::string out;
  auto cmp = [&](const char* key, auto a, auto b) {
    if (a != b) out += fmt::format("{}model.{}: {} in the checkpoint, {} in the config", out.empty() ? "" : "; ", key, a, b);
  };
  cmp("layers", ckpt.layers, run.layers);
  cmp("hidden", ckpt.hidden, run.hidden);
  cmp("heads", ckpt.heads, run.heads);
  cmp("seq_len", ckpt.seq_len, run.seq_len);
  cmp("vocab", ckpt.vocab, run.vocab);
  cmp("ffn_hidden", ckpt.ffn(), run.ffn());
  cmp("vocab_align", ckpt.vocab_align, run.vocab_align);
  cmp("kv_heads", ckpt.kv(), run.kv());
  cmp("mlp", std::string(mlp_kind_name(ckpt.mlp)), std::string(mlp_kind_name(run.mlp)));
  cmp("arch", std::string(arch_name(ckpt.arch)), std::string(arch_name(run.arch)));
  cmp("tie_embeddings", ckpt.tied(), run.tied());
  if (ckpt.arch == Arch::llama) {
    cmp("rope_theta", ckpt.rope_theta, run.rope_theta);
    cmp("rope_scaling", std::string(ckpt.rope_scaling.llama3 ? "\"llama3\"" : "\"none\""),
        std::string(run.rope_scaling.llama3 ? "\"llama3\"" : "\"none\""));
    if (ckpt.rope_scaling.llama3 && run.rope_scaling.llama3) {
      cmp("rope_factor", ckpt.rope_scaling.factor, run.rope_scaling.factor);
      cmp("rope_low_freq_factor", ckpt.rope_scaling.low_freq_factor, run.rope_scaling.low_freq_factor);
      cmp("rope_high_freq_factor", ckpt.rope_scaling.high_freq_factor, run.rope_scaling.high_freq_factor);
      cmp("rope_original_seq_len", ckpt.rope_scaling.original_max_positions, run.rope_scaling.original_max_positions);
    }
    cmp("norm_eps", ckpt.norm_eps, run.norm_eps);
  }
  return out;
}

}  // namespace tera
