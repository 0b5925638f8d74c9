// Weights by name and the Hugging Face GPT-2 layout; see hf_gpt2.h.
#include "ckpt/hf_gpt2.h"

#include <cmath>
#include <cstring>
#include <filesystem>
#include <set>
#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "ckpt/checkpoint.h"
#include "ckpt/model_checkpoint.h"
#include "ckpt/model_source.h"
#include "ckpt/safetensors_index.h"
#include "core/bf16.h"
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

constexpr uint64_t kMaxHfConfigBytes = uint64_t{1} << 20;  // GPT2Config is a few hundred bytes
constexpr const char* kUntiedHeadAdvice =
    "read it as an untied model (model.tie_embeddings = false), which keeps its own lm_head";

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

// Whether two stored tensors are byte for byte the same (a tied head stored twice).
bool same_tensor(const StTensorRef* a, const StTensorRef* b) {
  return a != nullptr && b != nullptr && a->dtype == b->dtype && a->shape == b->shape && a->bytes == b->bytes &&
         std::memcmp(a->data, b->data, a->bytes) == 0;
}

// GPT2Config's fields that change the function the weights compute: each
// must be what tera computes, else the import is refused (a model read with
// another function scores differently, without a word).
Status check_gpt2_function(const json& j, const std::string& cfg_path) {
  if (j.contains("activation_function")) {
    // tera's GELU is the tanh approximation: transformers' gelu_new, gelu_pytorch_tanh and gelu_fast.
    const json& a = j["activation_function"];
    const bool tanh_gelu = a.is_string() && (a == "gelu_new" || a == "gelu_pytorch_tanh" || a == "gelu_fast");
    if (!tanh_gelu) {
      return Status::error(fmt::format("{}: activation_function = {}; tera's GPT-2 MLP computes the tanh approximation "
                                       "of GELU (\"gelu_new\"), so this model would compute another function",
                                       cfg_path, a.dump()));
    }
  }
  if (j.contains("layer_norm_epsilon")) {
    const json& e = j["layer_norm_epsilon"];
    if (!e.is_number() || std::abs(e.get<double>() - 1e-5) > 1e-12) {
      return Status::error(fmt::format("{}: layer_norm_epsilon = {}; tera's GPT-2 LayerNorm uses 1e-5", cfg_path,
                                       e.dump()));
    }
  }
  if (j.contains("scale_attn_weights") && j["scale_attn_weights"] != true) {
    return Status::error(fmt::format("{}: scale_attn_weights = {}; tera scales attention scores by 1/sqrt(head size)",
                                     cfg_path, j["scale_attn_weights"].dump()));
  }
  if (j.contains("scale_attn_by_inverse_layer_idx") && j["scale_attn_by_inverse_layer_idx"] != false) {
    return Status::error(fmt::format("{}: scale_attn_by_inverse_layer_idx = {}; tera's attention has no per-layer "
                                     "scale", cfg_path, j["scale_attn_by_inverse_layer_idx"].dump()));
  }
  return ok_status();
}

}  // namespace

std::pair<std::string, bool> hf_gpt2_name(const std::string& tera_name) {
  if (tera_name == "lm_head.weight") return {tera_name, false};  // GPT2LMHeadModel's own Linear, [V, C] as tera's
  return {"transformer." + tera_name, is_block_matrix(tera_name)};
}

Status read_named_tensor(const SafetensorsFile& file, const ParamInfo& param, float* out) {
  const StTensorRef* t = file.find(param.name);
  if (t == nullptr) return Status::error(file.path() + ": tensor '" + param.name + "' is missing");
  if (t->dtype != "F32" || t->shape != param.shape) {
    return Status::error(file.path() + ": tensor '" + param.name + "' is " + t->dtype + " " + shape_str(t->shape) +
                         ", expected F32 " + shape_str(param.shape));
  }
  return read_tensor_f32(file, *t, out);
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
  const Shape& want = param.shape;
  if (transposed) {
    if (t->shape.size() != 2 || t->shape[0] != want[1] || t->shape[1] != want[0]) {
      return Status::error(file.path() + ": '" + t->name + "' is " + shape_str(t->shape) + ", expected " +
                           shape_str(Shape{want[1], want[0]}) + " (Conv1D layout of " + param.name + ")");
    }
    std::vector<float> src(static_cast<size_t>(numel(t->shape)));
    TERA_RETURN_IF_ERROR(read_tensor_f32(file, *t, src.data()));
    transpose(src.data(), t->shape[0], t->shape[1], out);
    return ok_status();
  }
  if (param.name == "wpe.weight" && t->shape.size() == 2 && t->shape[1] == want[1] && t->shape[0] > want[0]) {
    std::vector<float> all(static_cast<size_t>(numel(t->shape)));
    TERA_RETURN_IF_ERROR(read_tensor_f32(file, *t, all.data()));
    std::copy_n(all.begin(), numel(want), out);  // the first seq_len positions
    return ok_status();
  }
  if (t->shape != want) {
    return Status::error(file.path() + ": '" + t->name + "' is " + shape_str(t->shape) + ", expected " + shape_str(want));
  }
  return read_tensor_f32(file, *t, out);
}

Expected<std::vector<GlobalTensor>> read_global_weights(const std::string& path, ModelConfig* model) {
  auto source = resolve_model_source(path);
  if (!source) return source.status();
  auto reader = ModelSourceReader::open(*source);
  if (!reader) return reader.status();
  *model = reader->model();
  return reader->read_all();
}

Expected<std::vector<std::string>> write_hf_weights(const std::vector<StTensorRef>& f32, const std::string& path,
                                                    const HfExportOptions& opt) {
  std::error_code ec;
  if (fs::path(path).has_parent_path()) fs::create_directories(fs::path(path).parent_path(), ec);
  if (!opt.bf16) return write_safetensors_sharded(path, f32, {{"format", "pt"}}, opt.max_shard_bytes);
  std::vector<std::vector<uint16_t>> rounded;  // [tensor][numel]
  rounded.reserve(f32.size());
  std::vector<StTensorRef> refs;
  for (const StTensorRef& t : f32) {
    TERA_ASSERT(t.dtype == "F32", t.name);
    const auto* src = static_cast<const float*>(t.data);
    rounded.emplace_back(t.bytes / sizeof(float));
    for (size_t i = 0; i < rounded.back().size(); ++i) rounded.back()[i] = bf16_nearest(src[i]);
    refs.push_back({t.name, "BF16", t.shape, rounded.back().data(), rounded.back().size() * sizeof(uint16_t)});
  }
  return write_safetensors_sharded(path, refs, {{"format", "pt"}}, opt.max_shard_bytes);
}

Expected<std::vector<std::string>> export_hf_gpt2(const std::vector<GlobalTensor>& weights, const ModelConfig& model,
                                                  const std::string& path, const HfExportOptions& opt) {
  const int64_t eot = opt.eot;
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
  auto written = write_hf_weights(refs, path, opt);
  if (!written) return written.status();
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
                    {"tie_word_embeddings", model.tied()},
                    {"torch_dtype", opt.bf16 ? "bfloat16" : "float32"}};
  // GPT2Config defaults both to 50256 (GPT-2's <|endoftext|>): state the
  // model's own, or none (a byte-level model has no end-of-text token).
  cfg["bos_token_id"] = eot >= 0 ? json(eot) : json(nullptr);
  cfg["eos_token_id"] = eot >= 0 ? json(eot) : json(nullptr);
  TERA_RETURN_IF_ERROR(write_config_beside(path, cfg.dump(2) + "\n"));
  return written;
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
  bool config_tied = true;  // GPT2Config's default
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
    TERA_RETURN_IF_ERROR(check_gpt2_function(j, cfg_path));
    if (j.contains("tie_word_embeddings")) {
      if (!j["tie_word_embeddings"].is_boolean()) return Status::error(cfg_path + ": tie_word_embeddings must be true or false");
      config_tied = j["tie_word_embeddings"].get<bool>();
    }
    if (!config_tied && find_lm_head(file) == nullptr) {
      return Status::error(cfg_path + ": tie_word_embeddings = false but " + file.path() + " has no lm_head.weight");
    }
  }
  // The head: tied unless it is stored and differs from wte (or config.json says untied).
  const StTensorRef* head = find_lm_head(file);
  const bool head_differs = head != nullptr && !same_tensor(head, wte);
  if (config_tied && head_differs && fs::exists(cfg_path, ec)) {
    return Status::error(cfg_path + ": tie_word_embeddings = true, but " + file.path() + "'s " + head->name +
                         " differs from wte.weight; the config and the weights disagree");
  }
  if (head_differs || !config_tied) m.tie_embeddings = 0;
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
      // A tied model's head stored twice is dropped; an untied one is read (a spec parameter, above).
      const StTensorRef* wte = file.find(tera_names ? "wte.weight" : "transformer.wte.weight");
      if (wte == nullptr) wte = file.find("wte.weight");
      if (same_tensor(&t, wte)) continue;
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
