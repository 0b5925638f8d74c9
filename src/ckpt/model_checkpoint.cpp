// Model checkpoint save/load with atomic directory replacement.
#include "ckpt/model_checkpoint.h"

#include <unistd.h>

#include <cstring>
#include <filesystem>
#include <fmt/format.h>

#include "ckpt/safetensors.h"
#include "core/file_util.h"

namespace tera {

namespace fs = std::filesystem;
using json = nlohmann::json;

namespace {
// meta.json embeds the tokenizer (GPT-2's is ~2 MB as JSON); anything this
// large is not a meta.json.
constexpr uint64_t kMaxMetaBytes = uint64_t{1} << 30;
}  // namespace

json rope_scaling_to_json(const ModelConfig::RopeScaling& s) {
  if (!s.llama3) return nullptr;
  return json{{"rope_type", "llama3"},
              {"factor", s.factor},
              {"low_freq_factor", s.low_freq_factor},
              {"high_freq_factor", s.high_freq_factor},
              {"original_max_position_embeddings", s.original_max_positions}};
}

json model_config_to_json(const ModelConfig& m) {
  return json{{"layers", m.layers},   {"hidden", m.hidden},         {"heads", m.heads},
              {"seq_len", m.seq_len}, {"vocab", m.vocab},           {"ffn_hidden", m.ffn()},
              {"vocab_align", m.vocab_align}, {"kv_heads", m.kv()},      {"mlp", mlp_kind_name(m.mlp)},
              {"attention", attention_kind_name(m.attention)},
              {"arch", arch_name(m.arch)},
              {"tie_embeddings", m.tied()},
              {"rope_theta", m.rope_theta},
              {"norm_eps", m.norm_eps},
              {"rope_scaling", rope_scaling_to_json(m.rope_scaling)}};
}

Expected<ModelConfig::RopeScaling> rope_scaling_from_json(const json& j, const std::string& what) {
  if (!j.is_object()) return Status::error(what + ": must be an object {rope_type, factor, ...} or null");
  const json* type = j.contains("rope_type") ? &j["rope_type"] : j.contains("type") ? &j["type"] : nullptr;
  if (type == nullptr || !type->is_string()) return Status::error(what + ": rope_type is missing or not a string");
  if (*type != "llama3") {
    return Status::error(fmt::format("{}: rope_type = {}; tera implements \"llama3\" (Llama 3.1) scaling only", what,
                                     type->dump()));
  }
  ModelConfig::RopeScaling s;
  s.llama3 = true;
  auto number = [&](const char* key, double* out) -> Status {
    if (!j.contains(key) || !j[key].is_number()) {
      return Status::error(fmt::format("{}: {} is missing or not a number (rope_type \"llama3\" needs factor, "
                                       "low_freq_factor, high_freq_factor, original_max_position_embeddings)",
                                       what, key));
    }
    *out = j[key].get<double>();
    return ok_status();
  };
  TERA_RETURN_IF_ERROR(number("factor", &s.factor));
  TERA_RETURN_IF_ERROR(number("low_freq_factor", &s.low_freq_factor));
  TERA_RETURN_IF_ERROR(number("high_freq_factor", &s.high_freq_factor));
  const char* orig = "original_max_position_embeddings";
  if (!j.contains(orig) || !j[orig].is_number_integer()) {
    return Status::error(fmt::format("{}: {} is missing or not an integer (the context length before scaling)", what, orig));
  }
  s.original_max_positions = j[orig].get<int64_t>();
  return s;
}

Expected<ModelConfig> model_config_from_json(const json& j, const std::string& what) {
  ModelConfig m;
  auto get = [&](const char* k, int64_t* out) -> Status {
    if (!j.is_object() || !j.contains(k) || !j[k].is_number_integer()) {
      return Status::error(what + ": model." + k + " is missing or not an integer");
    }
    *out = j[k].get<int64_t>();
    return ok_status();
  };
  TERA_RETURN_IF_ERROR(get("layers", &m.layers));
  TERA_RETURN_IF_ERROR(get("hidden", &m.hidden));
  TERA_RETURN_IF_ERROR(get("heads", &m.heads));
  TERA_RETURN_IF_ERROR(get("seq_len", &m.seq_len));
  TERA_RETURN_IF_ERROR(get("vocab", &m.vocab));
  TERA_RETURN_IF_ERROR(get("ffn_hidden", &m.ffn_hidden));
  TERA_RETURN_IF_ERROR(get("vocab_align", &m.vocab_align));
  // Optional (absent in files written before grouped-query attention and gated MLPs).
  if (j.contains("kv_heads")) TERA_RETURN_IF_ERROR(get("kv_heads", &m.kv_heads));
  if (j.contains("mlp")) {
    if (!j["mlp"].is_string()) return Status::error(what + ": model.mlp must be a string");
    auto k = parse_mlp_kind(j["mlp"].get<std::string>());
    if (!k) return Status::error(what + ": model.mlp: " + k.error());
    m.mlp = *k;
  }
  // Optional: absent in files written before Llama (a GPT-2 block, tied).
  if (j.contains("arch")) {
    if (!j["arch"].is_string()) return Status::error(what + ": model.arch must be a string");
    auto a = parse_arch(j["arch"].get<std::string>());
    if (!a) return Status::error(what + ": model.arch: " + a.error());
    m.arch = *a;
  }
  if (j.contains("tie_embeddings")) {
    if (!j["tie_embeddings"].is_boolean()) return Status::error(what + ": model.tie_embeddings must be true or false");
    m.tie_embeddings = j["tie_embeddings"].get<bool>() ? 1 : 0;
  }
  for (const char* k : {"rope_theta", "norm_eps"}) {
    if (!j.contains(k)) continue;
    if (!j[k].is_number()) return Status::error(what + ": model." + k + " must be a number");
    (std::string(k) == "rope_theta" ? m.rope_theta : m.norm_eps) = j[k].get<double>();
  }
  // Optional: absent (or null) in files written before rope scaling: none.
  if (j.contains("rope_scaling") && !j["rope_scaling"].is_null()) {
    auto s = rope_scaling_from_json(j["rope_scaling"], what + ": model.rope_scaling");
    if (!s) return s.status();
    m.rope_scaling = *s;
  }
  if (j.contains("attention")) {  // absent in files written before flash attention: the default
    if (!j["attention"].is_string()) return Status::error(what + ": model.attention must be a string");
    auto k = parse_attention_kind(j["attention"].get<std::string>());
    if (!k) return Status::error(what + ": model.attention: " + k.error());
    m.attention = *k;
  }
  if (Status s = validate_model_config(m); !s) return Status::error(what + ": " + s.message());
  return m;
}

Status save_model_checkpoint(const std::string& dir, const ParamTable& table, const float* params,
                             const CheckpointMeta& meta) {
  TERA_ASSERT(table.tp() == 1, "save the global tensors of a tensor-parallel model with the NamedTensor overload");
  std::vector<NamedTensor> named;
  table.for_each([&](const ParamEntry& e) { named.push_back({e.info->name, e.info->shape, params + e.offset}); });
  return save_model_checkpoint(dir, named, meta);
}

Status save_model_checkpoint(const std::string& dir, const std::vector<NamedTensor>& named,
                             const CheckpointMeta& meta) {
  const fs::path final_dir(dir);
  const fs::path tmp = final_dir.string() + ".tmp." + std::to_string(getpid());
  std::error_code ec;
  fs::remove_all(tmp, ec);
  if (final_dir.has_parent_path()) fs::create_directories(final_dir.parent_path(), ec);
  if (!fs::create_directories(tmp, ec)) {
    return Status::error(tmp.string() + ": cannot create directory (" + ec.message() + ")");
  }
  // A write that fails (a full disk) leaves no staging directory behind.
  struct RemoveUnlessMoved {
    const fs::path& p;
    ~RemoveUnlessMoved() {
      std::error_code e;
      fs::remove_all(p, e);
    }
  } cleanup{tmp};
  std::vector<StTensorRef> tensors;
  for (const auto& t : named) {
    tensors.push_back(StTensorRef{t.name, "F32", t.shape, t.data, static_cast<size_t>(numel(t.shape)) * sizeof(float)});
  }
  auto crc = write_safetensors((tmp / "model.safetensors").string(), tensors, {{"format", "tera"}});
  if (!crc) return crc.status();
  json j = {{"format", kModelCheckpointFormat},
            {"version", kModelCheckpointVersion},
            {"model", model_config_to_json(meta.model)},
            {"step", meta.step},
            {"tokenizer", meta.tokenizer},
            {"tensors", {{"file", "model.safetensors"}, {"crc32", *crc}}},
            {"extra", meta.extra}};
  const std::string text = j.dump(2) + "\n";
  auto mf = AtomicFile::create((tmp / "meta.json").string());
  if (!mf) return mf.status();
  TERA_RETURN_IF_ERROR(mf->write(text.data(), text.size()));
  TERA_RETURN_IF_ERROR(mf->commit());
  // Swap into place: the old directory survives until the new one is complete.
  const fs::path old = final_dir.string() + ".old." + std::to_string(getpid());
  const bool had_old = fs::exists(final_dir, ec);
  if (had_old) {
    fs::rename(final_dir, old, ec);
    if (ec) return Status::error(dir + ": cannot move the previous checkpoint aside (" + ec.message() + ")");
  }
  fs::rename(tmp, final_dir, ec);
  if (ec) return Status::error(dir + ": cannot rename the new checkpoint into place (" + ec.message() + ")");
  const fs::path parent = final_dir.has_parent_path() ? final_dir.parent_path() : fs::path(".");
  TERA_RETURN_IF_ERROR(fsync_dir(parent.string()));
  if (had_old) fs::remove_all(old, ec);
  return ok_status();
}

Expected<CheckpointMeta> read_checkpoint_meta(const std::string& dir) {
  const std::string path = (fs::path(dir) / "meta.json").string();
  auto bytes = read_regular_file(path, "meta.json", kMaxMetaBytes);
  if (!bytes) {
    return Status::error(dir + ": not a tera checkpoint (" + bytes.error() + "); pass the directory train wrote (out.dir/final)");
  }
  json j;
  try {
    j = json::parse(bytes->begin(), bytes->end());
  } catch (const json::exception& e) {
    return Status::error(path + ": not valid JSON (" + e.what() + ")");
  }
  if (!j.is_object() || j.value("format", "") != kModelCheckpointFormat) {
    return Status::error(path + ": format is not '" + std::string(kModelCheckpointFormat) + "'");
  }
  if (!j.contains("version") || !j["version"].is_number_integer() || j["version"].get<int>() != kModelCheckpointVersion) {
    return Status::error(path + fmt::format(": unsupported format version {} (this tera reads version {})",
                                            j.contains("version") ? j["version"].dump() : "none",
                                            kModelCheckpointVersion));
  }
  auto model = model_config_from_json(j["model"], path);
  if (!model) return model.status();
  CheckpointMeta meta;
  meta.model = *model;
  meta.step = j.value("step", int64_t{0});
  meta.tokenizer = j.value("tokenizer", std::string("bytes"));
  if (j.contains("extra")) meta.extra = j["extra"];
  if (j.contains("tensors") && j["tensors"].is_object() && j["tensors"].contains("crc32") &&
      j["tensors"]["crc32"].is_number_unsigned() && j["tensors"]["crc32"].get<uint64_t>() <= 0xffffffffull) {
    meta.tensors_crc32 = j["tensors"]["crc32"].get<uint32_t>();
  }
  return meta;
}

Status load_model_weights(const std::string& dir, const ParamTable& table, float* params) {
  const std::string meta_path = (fs::path(dir) / "meta.json").string();
  auto bytes = read_regular_file(meta_path, "meta.json", kMaxMetaBytes);
  if (!bytes) return bytes.status();
  json j;
  try {
    j = json::parse(bytes->begin(), bytes->end());
  } catch (const json::exception& e) {
    return Status::error(meta_path + ": not valid JSON (" + e.what() + ")");
  }
  if (!j.contains("tensors") || !j["tensors"].is_object() || !j["tensors"].contains("file") ||
      !j["tensors"]["file"].is_string() || !j["tensors"].contains("crc32") || !j["tensors"]["crc32"].is_number_unsigned()) {
    return Status::error(meta_path + ": 'tensors' must hold the tensor file name and its crc32");
  }
  const std::string file = j["tensors"]["file"].get<std::string>();
  if (file.find('/') != std::string::npos) return Status::error(meta_path + ": tensor file name must be plain");
  const std::string tpath = (fs::path(dir) / file).string();
  auto st = SafetensorsFile::open(tpath);
  if (!st) return st.status();
  const uint32_t want = j["tensors"]["crc32"].get<uint32_t>();
  if (st->crc32() != want) {
    return Status::error(tpath + fmt::format(": checksum mismatch (file {:08x}, meta.json {:08x}); the file is "
                                             "corrupt or was replaced", st->crc32(), want));
  }
  Status result = ok_status();
  table.for_each([&](const ParamEntry& e) {
    if (!result) return;
    const StTensorRef* t = st->find(e.info->name);
    if (t == nullptr) {
      result = Status::error(tpath + ": tensor '" + e.info->name + "' is missing");
      return;
    }
    if (t->dtype != "F32" || t->shape != e.info->shape) {
      result = Status::error(tpath + ": tensor '" + e.info->name + "' is " + t->dtype + " " + shape_str(t->shape) +
                             ", expected F32 " + shape_str(e.info->shape));
      return;
    }
    std::memcpy(params + e.offset, t->data, t->bytes);
    std::memset(params + e.offset + numel(e.info->shape), 0,
                static_cast<size_t>(e.count - numel(e.info->shape)) * sizeof(float));
  });
  return result;
}

}  // namespace tera
