// The Hugging Face Llama layout; see hf_llama.h.
#include "ckpt/hf_llama.h"

#include <cmath>
#include <cstring>
#include <filesystem>
#include <set>
#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "ckpt/model_checkpoint.h"
#include "core/file_util.h"

namespace tera {

namespace fs = std::filesystem;
using json = nlohmann::json;

namespace {

constexpr uint64_t kMaxHfConfigBytes = uint64_t{1} << 20;  // LlamaConfig is about a kilobyte

bool starts_with(const std::string& s, const std::string& p) { return s.rfind(p, 0) == 0; }
bool ends_with(const std::string& s, const std::string& suffix) {
  return s.size() >= suffix.size() && s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

// "h.<l>.<rest>" -> (l, rest); l = -1 when not a block parameter.
std::pair<int64_t, std::string> split_block_name(const std::string& name) {
  if (!starts_with(name, "h.")) return {-1, name};
  const size_t dot = name.find('.', 2);
  if (dot == std::string::npos) return {-1, name};
  return {std::stoll(name.substr(2, dot - 2)), name.substr(dot + 1)};
}

// The named tensor, of exactly `shape`.
Expected<const StTensorRef*> find_shaped(const SafetensorsFile& file, const std::string& name, const Shape& shape,
                                         const std::string& of) {
  const StTensorRef* t = file.find(name);
  if (t == nullptr) return Status::error(file.path() + ": tensor '" + name + "' is missing (" + of + ")");
  if (t->shape != shape) {
    return Status::error(file.path() + ": '" + name + "' is " + shape_str(t->shape) + ", expected " + shape_str(shape) +
                         " (" + of + "); the file and its config.json disagree");
  }
  return t;
}

std::string config_path_of(const SafetensorsFile& file) {
  const fs::path dir = fs::path(file.path()).has_parent_path() ? fs::path(file.path()).parent_path() : fs::path(".");
  return (dir / "config.json").string();
}

}  // namespace

bool is_hf_llama_file(const SafetensorsFile& file) { return file.find("model.embed_tokens.weight") != nullptr; }

std::vector<std::string> hf_llama_names(const std::string& tera_name) {
  if (tera_name == "wte.weight") return {"model.embed_tokens.weight"};
  if (tera_name == "ln_f.weight") return {"model.norm.weight"};
  if (tera_name == "lm_head.weight") return {"lm_head.weight"};
  const auto [l, rest] = split_block_name(tera_name);
  if (l < 0) return {};
  const std::string p = fmt::format("model.layers.{}.", l);
  if (rest == "ln_1.weight") return {p + "input_layernorm.weight"};
  if (rest == "ln_2.weight") return {p + "post_attention_layernorm.weight"};
  if (rest == "attn.c_attn.weight") {
    return {p + "self_attn.q_proj.weight", p + "self_attn.k_proj.weight", p + "self_attn.v_proj.weight"};
  }
  if (rest == "attn.c_proj.weight") return {p + "self_attn.o_proj.weight"};
  if (rest == "mlp.c_gate.weight") return {p + "mlp.gate_proj.weight"};
  if (rest == "mlp.c_fc.weight") return {p + "mlp.up_proj.weight"};
  if (rest == "mlp.c_proj.weight") return {p + "mlp.down_proj.weight"};
  return {};
}

Status read_hf_llama_tensor(const SafetensorsFile& file, const ModelConfig& model, const ParamInfo& param, float* out) {
  const std::vector<std::string> names = hf_llama_names(param.name);
  if (names.empty()) {
    return Status::error(file.path() + ": tera parameter '" + param.name + "' has no Hugging Face Llama tensor");
  }
  if (names.size() == 1) {
    auto t = find_shaped(file, names[0], param.shape, param.name);
    if (!t) return t.status();
    return read_tensor_f32(file, **t, out);
  }
  // The fused QKV rows: q [H hs, C], then k and v [KV hs, C].
  const int64_t C = model.hidden, hs = model.head_size();
  const int64_t rows[3] = {model.heads * hs, model.kv() * hs, model.kv() * hs};
  float* dst = out;
  for (int i = 0; i < 3; ++i) {
    auto t = find_shaped(file, names[static_cast<size_t>(i)], Shape{rows[i], C},
                         fmt::format("{} of {} heads of size {}", i == 0 ? "query" : "key/value", i == 0 ? model.heads : model.kv(), hs));
    if (!t) return t.status();
    TERA_RETURN_IF_ERROR(read_tensor_f32(file, **t, dst));
    dst += rows[i] * C;
  }
  return ok_status();
}

Expected<ModelConfig> infer_hf_llama_config(const SafetensorsFile& file) {
  const std::string cfg_path = config_path_of(file);
  std::error_code ec;
  if (!fs::exists(cfg_path, ec)) {
    return Status::error(file.path() + ": a Hugging Face Llama file needs its config.json (LlamaConfig) beside it: "
                                       "the heads, key/value heads, rope_theta and rms_norm_eps are not in the tensors; "
                                       "copy the model's config.json to " + cfg_path);
  }
  auto bytes = read_regular_file(cfg_path, "config.json", kMaxHfConfigBytes);
  if (!bytes) return bytes.status();
  const json j = json::parse(bytes->begin(), bytes->end(), nullptr, false);
  if (j.is_discarded() || !j.is_object()) return Status::error(cfg_path + ": not a JSON object (LlamaConfig)");
  auto integer = [&](const char* key, bool required, int64_t fallback) -> Expected<int64_t> {
    if (!j.contains(key) || j[key].is_null()) {
      if (required) return Status::error(fmt::format("{}: '{}' is missing; LlamaConfig needs it", cfg_path, key));
      return fallback;
    }
    if (!j[key].is_number_integer() || j[key].get<int64_t>() <= 0) {
      return Status::error(fmt::format("{}: '{}' must be a positive integer", cfg_path, key));
    }
    return j[key].get<int64_t>();
  };
  auto number = [&](const char* key, double fallback) -> Expected<double> {
    if (!j.contains(key) || j[key].is_null()) return fallback;
    if (!j[key].is_number()) return Status::error(fmt::format("{}: '{}' must be a number", cfg_path, key));
    return j[key].get<double>();
  };
  if (j.contains("model_type") && j["model_type"] != "llama") {
    return Status::error(fmt::format("{}: model_type = {}, but the tensors are Llama's (model.embed_tokens.weight); "
                                     "tera reads model_type \"llama\"", cfg_path, j["model_type"].dump()));
  }
  if (j.contains("hidden_act") && j["hidden_act"] != "silu") {
    return Status::error(fmt::format("{}: hidden_act = {}; tera's Llama MLP is SwiGLU (\"silu\")", cfg_path,
                                     j["hidden_act"].dump()));
  }
  ModelConfig::RopeScaling scaling;  // none unless config.json has Llama 3.1's
  if (j.contains("rope_scaling") && !j["rope_scaling"].is_null()) {
    const json& r = j["rope_scaling"];
    const bool plain = r.is_object() && ((r.contains("rope_type") && r["rope_type"] == "default") ||
                                         (!r.contains("rope_type") && r.contains("type") && r["type"] == "default"));
    if (!plain) {
      auto s = rope_scaling_from_json(r, cfg_path + ": rope_scaling");
      if (!s) return s.status();
      scaling = *s;
    }
  }
  for (const char* key : {"attention_bias", "mlp_bias"}) {
    if (j.contains(key) && j[key] == true) {
      return Status::error(fmt::format("{}: {} = true; tera's Llama blocks have no biases", cfg_path, key));
    }
  }
  ModelConfig m;
  m.arch = Arch::llama;
  m.mlp = MlpKind::gated;
  auto layers = integer("num_hidden_layers", true, 0);
  auto hidden = integer("hidden_size", true, 0);
  auto heads = integer("num_attention_heads", true, 0);
  auto vocab = integer("vocab_size", true, 0);
  auto ffn = integer("intermediate_size", true, 0);
  if (!layers || !hidden || !heads || !vocab || !ffn) {
    for (auto* e : {&layers, &hidden, &heads, &vocab, &ffn}) {
      if (!*e) return e->status();
    }
  }
  auto kv = integer("num_key_value_heads", false, *heads);
  if (!kv) return kv.status();
  auto positions = integer("max_position_embeddings", false, 2048);
  if (!positions) return positions.status();
  auto theta = number("rope_theta", 10000);
  if (!theta) return theta.status();
  auto eps = number("rms_norm_eps", 1e-6);
  if (!eps) return eps.status();
  m.layers = *layers;
  m.hidden = *hidden;
  m.heads = *heads;
  m.vocab = *vocab;
  m.ffn_hidden = *ffn;
  m.kv_heads = *kv;
  m.seq_len = *positions;
  m.rope_theta = *theta;
  m.rope_scaling = scaling;
  m.norm_eps = *eps;
  if (m.heads % m.kv_heads != 0) {
    return Status::error(fmt::format("{}: num_key_value_heads = {} must divide num_attention_heads = {} (each key/value "
                                     "head serves an equal group of query heads)", cfg_path, m.kv_heads, m.heads));
  }
  if (m.hidden % m.heads != 0) {
    return Status::error(fmt::format("{}: num_attention_heads = {} does not divide hidden_size = {}", cfg_path, m.heads,
                                     m.hidden));
  }
  if (j.contains("head_dim") && !j["head_dim"].is_null() && j["head_dim"] != m.hidden / m.heads) {
    return Status::error(fmt::format("{}: head_dim = {} is not hidden_size / num_attention_heads = {}; tera's heads "
                                     "are hidden / heads wide", cfg_path, j["head_dim"].dump(), m.hidden / m.heads));
  }
  const bool has_head = file.find("lm_head.weight") != nullptr;
  bool tied = !has_head;
  if (j.contains("tie_word_embeddings")) {
    if (!j["tie_word_embeddings"].is_boolean()) return Status::error(cfg_path + ": tie_word_embeddings must be true or false");
    tied = j["tie_word_embeddings"].get<bool>();
    if (!tied && !has_head) {
      return Status::error(cfg_path + ": tie_word_embeddings = false, but " + file.path() +
                           " has no lm_head.weight; the output layer is missing");
    }
  }
  m.tie_embeddings = tied ? 1 : 0;
  if (Status s = validate_model_config(m); !s) return Status::error(cfg_path + ": " + s.message());
  // The tensors must be these: the embedding, every layer's matrices and no
  // layer past num_hidden_layers (check_hf_llama_tensors covers the rest).
  const ModelSpec spec(m);
  for (const ParamInfo& p : spec.params()) {
    const std::vector<std::string> names = hf_llama_names(p.name);
    if (names.size() != 1) continue;  // q/k/v: read_hf_llama_tensor names the shape
    auto t = find_shaped(file, names[0], p.shape, fmt::format("{} of the model {} describes", p.name, cfg_path));
    if (!t) return t.status();
  }
  const StTensorRef* k = file.find("model.layers.0.self_attn.k_proj.weight");
  if (k != nullptr && (k->shape.size() != 2 || k->shape[0] != m.kv() * m.head_size())) {
    return Status::error(fmt::format("{}: num_key_value_heads = {} means k_proj rows {} x {}, but {}'s "
                                     "model.layers.0.self_attn.k_proj.weight is {}",
                                     cfg_path, m.kv(), m.kv(), m.head_size(), file.path(), shape_str(k->shape)));
  }
  return m;
}

Status check_hf_llama_tensors(const SafetensorsFile& file, const ModelSpec& spec) {
  std::set<std::string> used;
  for (const ParamInfo& p : spec.params()) {
    for (const std::string& n : hf_llama_names(p.name)) used.insert(n);
  }
  std::vector<std::string> unknown;
  for (const StTensorRef& t : file.tensors()) {
    if (used.count(t.name) || ends_with(t.name, ".rotary_emb.inv_freq")) continue;
    if (t.name == "lm_head.weight") {  // a tied model's head stored anyway: must be the embedding
      const StTensorRef* e = file.find("model.embed_tokens.weight");
      if (e != nullptr && e->dtype == t.dtype && e->shape == t.shape && e->bytes == t.bytes &&
          std::memcmp(e->data, t.data, t.bytes) == 0) {
        continue;
      }
      return Status::error(file.path() + ": lm_head.weight differs from model.embed_tokens.weight, but config.json "
                                         "says tie_word_embeddings = true; set it to false to import the separate head");
    }
    unknown.push_back(t.name);
  }
  if (!unknown.empty()) {
    return Status::error(fmt::format("{}: {} tensor{} that a {}-layer Llama does not have ({}); is config.json "
                                     "(num_hidden_layers) or the file wrong?",
                                     file.path(), unknown.size(), unknown.size() == 1 ? "" : "s",
                                     spec.config().layers, quoted_names(unknown)));
  }
  return ok_status();
}

Expected<std::vector<std::string>> export_hf_llama(const std::vector<GlobalTensor>& weights, const ModelConfig& model,
                                                   const std::string& path, const HfExportOptions& opt) {
  if (model.arch != Arch::llama) return Status::error("export_hf_llama: not a Llama model (model.arch)");
  const int64_t C = model.hidden, hs = model.head_size();
  std::vector<StTensorRef> refs;
  for (const GlobalTensor& t : weights) {
    const std::vector<std::string> names = hf_llama_names(t.name);
    if (names.empty()) return Status::error("export: tera parameter '" + t.name + "' has no Hugging Face Llama name");
    if (names.size() == 1) {
      refs.push_back({names[0], "F32", t.shape, t.data.data(), t.data.size() * sizeof(float)});
      continue;
    }
    const int64_t rows[3] = {model.heads * hs, model.kv() * hs, model.kv() * hs};
    const float* src = t.data.data();
    for (int i = 0; i < 3; ++i) {  // views into the fused rows: q | k | v
      refs.push_back({names[static_cast<size_t>(i)], "F32", Shape{rows[i], C}, src,
                      static_cast<size_t>(rows[i] * C) * sizeof(float)});
      src += rows[i] * C;
    }
  }
  auto written = write_hf_weights(refs, path, opt);
  if (!written) return written.status();
  json cfg = {{"architectures", {"LlamaForCausalLM"}},
              {"model_type", "llama"},
              {"vocab_size", model.vocab},
              {"hidden_size", model.hidden},
              {"intermediate_size", model.ffn()},
              {"num_hidden_layers", model.layers},
              {"num_attention_heads", model.heads},
              {"num_key_value_heads", model.kv()},
              {"head_dim", hs},
              {"hidden_act", "silu"},
              {"max_position_embeddings", model.seq_len},
              {"rms_norm_eps", model.norm_eps},
              {"rope_theta", model.rope_theta},
              {"rope_scaling", rope_scaling_to_json(model.rope_scaling)},
              {"attention_bias", false},
              {"mlp_bias", false},
              {"attention_dropout", 0.0},
              {"tie_word_embeddings", model.tied()},
              {"torch_dtype", opt.bf16 ? "bfloat16" : "float32"}};
  cfg["bos_token_id"] = opt.eot >= 0 ? json(opt.eot) : json(nullptr);
  cfg["eos_token_id"] = opt.eot >= 0 ? json(opt.eot) : json(nullptr);
  TERA_RETURN_IF_ERROR(write_config_beside(path, cfg.dump(2) + "\n"));
  return written;
}

}  // namespace tera
