// Weights by name and the Hugging Face GPT-2 layout; see hf_gpt2.h.
#include "ckpt/hf_gpt2.h"

#include <cstring>
#include <filesystem>
#include <set>
#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "ckpt/checkpoint.h"
#include "ckpt/model_checkpoint.h"
#include "ckpt/model_source.h"
#include "core/file_util.h"

namespace tera {

namespace fs = std::filesystem;
using json = nlohmann::json;

namespace {

bool is_block_matrix(const std::string& name) {
  auto ends = [&](const char* s) {
    const size_t n = std::strlen(s);
    return name.size() >= n && name.compare(name.size() - n, n, s) == 0;
  };
  return name.rfind("h.", 0) == 0 && (ends("attn.c_attn.weight") || ends("attn.c_proj.weight") ||
                                      ends("mlp.c_fc.weight") || ends("mlp.c_proj.weight") || ends("mlp.c_gate.weight"));
}

// dst[c, r] = src[r, c] for src [rows, cols].
void transpose(const float* src, int64_t rows, int64_t cols, float* dst) {
  for (int64_t r = 0; r < rows; ++r) {
    for (int64_t c = 0; c < cols; ++c) dst[c * rows + r] = src[r * cols + c];
  }
}

void copy_floats(const void* src, size_t n, float* dst) { std::memcpy(dst, src, n * sizeof(float)); }

constexpr uint64_t kMaxHfConfigBytes = uint64_t{1} << 20;  // GPT2Config is a few hundred bytes
constexpr const char* kUntiedHeadAdvice =
    "tera ties the output head to the token embedding (wte) and has no separate lm_head, so this file cannot be "
    "imported without losing its head";

bool ends_with(const std::string& s, const char* suffix) {
  const size_t n = std::strlen(suffix);
  return s.size() >= n && s.compare(s.size() - n, n, suffix) == 0;
}

// The causal-mask buffers older GPT-2 files carry (not weights).
bool is_attention_mask_buffer(const std::string& name) {
  return ends_with(name, ".attn.bias") || ends_with(name, ".attn.masked_bias");
}

const StTensorRef* find_lm_head(const SafetensorsFile& file) {
  const StTensorRef* t = file.find("lm_head.weight");
  return t != nullptr ? t : file.find("transformer.lm_head.weight");
}

}  // namespace

std::pair<std::string, bool> hf_gpt2_name(const std::string& tera_name) {
  return {"transformer." + tera_name, is_block_matrix(tera_name)};
}

Status read_named_tensor(const SafetensorsFile& file, const ParamInfo& param, float* out) {
  const StTensorRef* t = file.find(param.name);
  if (t == nullptr) return Status::error(file.path() + ": tensor '" + param.name + "' is missing");
  if (t->dtype != "F32" || t->shape != param.shape) {
    return Status::error(file.path() + ": tensor '" + param.name + "' is " + t->dtype + " " + shape_str(t->shape) +
                         ", expected F32 " + shape_str(param.shape));
  }
  copy_floats(t->data, static_cast<size_t>(numel(param.shape)), out);
  return ok_status();
}

Status read_hf_or_tera_tensor(const SafetensorsFile& file, const ParamInfo& param, float* out) {
  // tera writes {"format": "tera"} into its files' metadata; anything else is
  // read as Hugging Face GPT-2 (whose unprefixed names equal tera's, but
  // whose matrices are transposed).
  if (auto it = file.metadata().find("format"); it != file.metadata().end() && it->second == "tera") {
    return read_named_tensor(file, param, out);
  }
  const auto [hf, transposed] = hf_gpt2_name(param.name);
  const StTensorRef* t = file.find(hf);
  if (t == nullptr) t = file.find(param.name);  // the unprefixed original gpt2 names
  if (t == nullptr) {
    return Status::error(file.path() + ": neither '" + hf + "' nor '" + param.name + "' is in the file");
  }
  if (t->dtype != "F32") {
    return Status::error(file.path() + ": '" + t->name + "' is " + t->dtype + "; tera imports F32 weights only");
  }
  const Shape& want = param.shape;
  if (transposed) {
    if (t->shape.size() != 2 || t->shape[0] != want[1] || t->shape[1] != want[0]) {
      return Status::error(file.path() + ": '" + t->name + "' is " + shape_str(t->shape) + ", expected " +
                           shape_str(Shape{want[1], want[0]}) + " (Conv1D layout of " + param.name + ")");
    }
    std::vector<float> src(static_cast<size_t>(numel(t->shape)));
    copy_floats(t->data, src.size(), src.data());
    transpose(src.data(), t->shape[0], t->shape[1], out);
    return ok_status();
  }
  if (param.name == "wpe.weight" && t->shape.size() == 2 && t->shape[1] == want[1] && t->shape[0] >= want[0]) {
    copy_floats(t->data, static_cast<size_t>(numel(want)), out);  // the first seq_len positions
    return ok_status();
  }
  if (t->shape != want) {
    return Status::error(file.path() + ": '" + t->name + "' is " + shape_str(t->shape) + ", expected " + shape_str(want));
  }
  copy_floats(t->data, static_cast<size_t>(numel(want)), out);
  return ok_status();
}

Expected<std::vector<GlobalTensor>> read_global_weights(const std::string& path, ModelConfig* model) {
  auto source = resolve_model_source(path);
  if (!source) return source.status();
  auto reader = ModelSourceReader::open(*source);
  if (!reader) return reader.status();
  *model = reader->model();
  return reader->read_all();
}

Status export_hf_gpt2(const std::vector<GlobalTensor>& weights, const ModelConfig& model, const std::string& path,
                      int64_t eot) {
  if (model.arch != Arch::gpt2 || model.mlp != MlpKind::standard || model.kv() != model.heads) {
    return Status::error("Hugging Face GPT-2 has no gated MLP or grouped-query attention; this model cannot be exported "
                         "as GPT-2");
  }
  std::vector<std::vector<float>> transposed;  // storage for the Conv1D copies
  transposed.reserve(weights.size());
  std::vector<StTensorRef> refs;
  for (const GlobalTensor& t : weights) {
    const auto [hf, tr] = hf_gpt2_name(t.name);
    if (tr) {
      transposed.emplace_back(t.data.size());
      transpose(t.data.data(), t.shape[0], t.shape[1], transposed.back().data());
      refs.push_back({hf, "F32", Shape{t.shape[1], t.shape[0]}, transposed.back().data(), t.data.size() * sizeof(float)});
    } else {
      refs.push_back({hf, "F32", t.shape, t.data.data(), t.data.size() * sizeof(float)});
    }
  }
  std::error_code ec;
  if (fs::path(path).has_parent_path()) fs::create_directories(fs::path(path).parent_path(), ec);
  auto crc = write_safetensors(path, refs, {{"format", "pt"}});
  if (!crc) return crc.status();
  json cfg = {{"architectures", {"GPT2LMHeadModel"}},
                    {"model_type", "gpt2"},
                    {"vocab_size", model.vocab},
                    {"n_positions", model.seq_len},
                    {"n_ctx", model.seq_len},
                    {"n_embd", model.hidden},
                    {"n_layer", model.layers},
                    {"n_head", model.heads},
                    {"n_inner", model.ffn()},
                    {"activation_function", "gelu_new"},
                    {"layer_norm_epsilon", 1e-5},
                    {"resid_pdrop", 0.0},
                    {"embd_pdrop", 0.0},
                    {"attn_pdrop", 0.0},
                    {"tie_word_embeddings", true},
                    {"torch_dtype", "float32"}};
  // GPT2Config defaults both to 50256 (GPT-2's <|endoftext|>): state the
  // model's own, or none (a byte-level model has no end-of-text token).
  cfg["bos_token_id"] = eot >= 0 ? json(eot) : json(nullptr);
  cfg["eos_token_id"] = eot >= 0 ? json(eot) : json(nullptr);
  return write_config_beside(path, cfg.dump(2) + "\n");
}

Status write_config_beside(const std::string& weights_path, const std::string& json_text) {
  const fs::path parent = fs::path(weights_path).has_parent_path() ? fs::path(weights_path).parent_path() : fs::path(".");
  auto f = AtomicFile::create((parent / "config.json").string());
  if (!f) return f.status();
  TERA_RETURN_IF_ERROR(f->write(json_text.data(), json_text.size()));
  return f->commit();
}

std::string quoted_names(const std::vector<std::string>& names, size_t max) {
  std::string out;
  for (size_t i = 0; i < names.size() && i < max; ++i) out += (i ? ", '" : "'") + names[i] + "'";
  if (names.size() > max) out += fmt::format(" and {} more", names.size() - max);
  return out;
}

Expected<ModelConfig> infer_hf_gpt2_config(const SafetensorsFile& file, int64_t heads) {
  auto find = [&](const std::string& n) {
    const StTensorRef* t = file.find("transformer." + n);
    return t != nullptr ? t : file.find(n);
  };
  const StTensorRef* wte = find("wte.weight");
  const StTensorRef* wpe = find("wpe.weight");
  const StTensorRef* fc = find("h.0.mlp.c_fc.weight");
  if (wte == nullptr || wpe == nullptr || fc == nullptr || wte->shape.size() != 2 || wpe->shape.size() != 2 ||
      fc->shape.size() != 2) {
    return Status::error(file.path() + ": not a GPT-2 weights file (needs wte.weight, wpe.weight and h.0.mlp.c_fc.weight, "
                                       "with or without the 'transformer.' prefix)");
  }
  ModelConfig m;
  m.vocab = wte->shape[0];
  m.hidden = wte->shape[1];
  m.seq_len = wpe->shape[0];
  m.ffn_hidden = fc->shape[1];
  while (find(fmt::format("h.{}.ln_1.weight", m.layers)) != nullptr) ++m.layers;
  // config.json beside the file (GPT2Config) must describe these tensors:
  // a field that disagrees means the file is not the model it claims to be.
  const std::string cfg_path = (fs::path(file.path()).parent_path() / "config.json").string();
  std::error_code ec;
  if (fs::exists(cfg_path, ec)) {
    auto bytes = read_regular_file(cfg_path, "config.json", kMaxHfConfigBytes);
    if (!bytes) return bytes.status();
    const json j = json::parse(bytes->begin(), bytes->end(), nullptr, false);
    if (j.is_discarded() || !j.is_object()) return Status::error(cfg_path + ": not a JSON object (GPT2Config)");
    const std::string tensors = fmt::format("the tensors of {}", file.path());
    struct Field {
      const char* key;
      int64_t have;
      std::string from;
    };
    const Field fields[] = {
        {"n_layer", m.layers, fmt::format("{} hold {} layer{} (h.0 .. h.{})", tensors, m.layers, m.layers == 1 ? "" : "s", m.layers - 1)},
        {"n_embd", m.hidden, fmt::format("{} have hidden size {} (wte.weight {})", tensors, m.hidden, shape_str(wte->shape))},
        {"vocab_size", m.vocab, fmt::format("{} have {} tokens (wte.weight {})", tensors, m.vocab, shape_str(wte->shape))},
        {"n_positions", m.seq_len,
         fmt::format("{} have {} positions (wpe.weight {})", tensors, m.seq_len, shape_str(wpe->shape))},
        {"n_inner", m.ffn_hidden,
         fmt::format("{} have MLP width {} (h.0.mlp.c_fc.weight {})", tensors, m.ffn_hidden, shape_str(fc->shape))},
    };
    for (const Field& f : fields) {
      if (!j.contains(f.key) || j[f.key].is_null()) continue;  // n_inner: null means 4 * n_embd
      if (!j[f.key].is_number_integer()) return Status::error(fmt::format("{}: {} must be an integer", cfg_path, f.key));
      const auto v = j[f.key].get<int64_t>();
      if (v != f.have) {
        return Status::error(fmt::format("{}: {} = {}, but {}; the config and the weights disagree", cfg_path, f.key, v,
                                         f.from));
      }
    }
    if (j.contains("n_inner") && j["n_inner"].is_null() && m.ffn_hidden != 4 * m.hidden) {
      return Status::error(fmt::format("{}: n_inner = null means 4 * n_embd = {}, but {} have MLP width {}", cfg_path,
                                       4 * m.hidden, tensors, m.ffn_hidden));
    }
    if (j.contains("n_head")) {
      if (!j["n_head"].is_number_integer() || j["n_head"].get<int64_t>() <= 0) {
        return Status::error(cfg_path + ": n_head must be a positive integer");
      }
      const auto n = j["n_head"].get<int64_t>();
      if (heads > 0 && heads != n) {
        return Status::error(fmt::format("--heads {} disagrees with {}: n_head = {}", heads, cfg_path, n));
      }
      if (m.hidden % n != 0) {
        return Status::error(fmt::format("{}: n_head = {} does not divide the hidden size {} of {}", cfg_path, n,
                                         m.hidden, tensors));
      }
      heads = n;
    }
    if (j.contains("tie_word_embeddings") && j["tie_word_embeddings"] == false && find_lm_head(file) == nullptr) {
      return Status::error(cfg_path + ": tie_word_embeddings = false but " + file.path() +
                           " has no lm_head.weight; " + kUntiedHeadAdvice);
    }
  }
  m.heads = heads;
  if (m.heads <= 0) {
    return Status::error(file.path() + ": the number of heads is not in the tensors; put GPT2Config's config.json "
                                       "beside the file or pass --heads");
  }
  if (Status s = validate_model_config(m); !s) return Status::error(file.path() + ": " + s.message());
  return m;
}

Status check_hf_gpt2_tensors(const SafetensorsFile& file, const ModelSpec& spec) {
  const bool tera_names = [&] {
    auto it = file.metadata().find("format");
    return it != file.metadata().end() && it->second == "tera";
  }();
  std::set<std::string> used;
  for (const ParamInfo& p : spec.params()) {
    used.insert(p.name);
    if (!tera_names) used.insert(hf_gpt2_name(p.name).first);
  }
  std::vector<std::string> unknown;
  for (const StTensorRef& t : file.tensors()) {
    if (used.count(t.name)) continue;
    if (!tera_names && is_attention_mask_buffer(t.name)) continue;
    if (t.name == "lm_head.weight" || t.name == "transformer.lm_head.weight") {
      const StTensorRef* wte = file.find(tera_names ? "wte.weight" : "transformer.wte.weight");
      if (wte == nullptr) wte = file.find("wte.weight");
      const bool tied = wte != nullptr && wte->dtype == t.dtype && wte->shape == t.shape && wte->bytes == t.bytes &&
                        std::memcmp(wte->data, t.data, t.bytes) == 0;
      if (tied) continue;
      return Status::error(file.path() + ": '" + t.name + "' differs from the token embedding (wte.weight): the model " +
                           "has an untied output head; " + kUntiedHeadAdvice);
    }
    unknown.push_back(t.name);
  }
  if (!unknown.empty()) {
    return Status::error(fmt::format("{}: {} tensor{} that a {}-layer GPT-2 does not have ({}); importing would drop "
                                     "{}; is config.json (n_layer) or the file wrong?",
                                     file.path(), unknown.size() == 1 ? "a" : std::to_string(unknown.size()),
                                     unknown.size() == 1 ? "" : "s", spec.config().layers, quoted_names(unknown),
                                     unknown.size() == 1 ? "it" : "them"));
  }
  return ok_status();
}

}  // namespace tera
