// Weights by name and the Hugging Face GPT-2 layout; see hf_gpt2.h.
#include "ckpt/hf_gpt2.h"

#include <cstring>
#include <filesystem>
#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "ckpt/checkpoint.h"
#include "ckpt/model_checkpoint.h"
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
  return Status::ok();
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
    return Status::ok();
  }
  if (param.name == "wpe.weight" && t->shape.size() == 2 && t->shape[1] == want[1] && t->shape[0] >= want[0]) {
    copy_floats(t->data, static_cast<size_t>(numel(want)), out);  // the first seq_len positions
    return Status::ok();
  }
  if (t->shape != want) {
    return Status::error(file.path() + ": '" + t->name + "' is " + shape_str(t->shape) + ", expected " + shape_str(want));
  }
  copy_floats(t->data, static_cast<size_t>(numel(want)), out);
  return Status::ok();
}

Expected<std::vector<GlobalTensor>> read_global_weights(const std::string& dir, ModelConfig* model) {
  std::vector<GlobalTensor> out;
  if (auto info = read_checkpoint_info(dir); info) {  // a training checkpoint
    auto reader = CheckpointReader::open(dir, /*verify_crc=*/true);
    if (!reader) return reader.status();
    *model = reader->info().model;
    for (const ParamInfo& p : reader->spec().params()) {
      GlobalTensor t{p.name, p.shape, std::vector<float>(static_cast<size_t>(numel(p.shape)))};
      TERA_RETURN_IF_ERROR(reader->read_global(StateKind::param, p, t.data.data()));
      out.push_back(std::move(t));
    }
    return out;
  }
  auto meta = read_checkpoint_meta(dir);  // a tera-model directory (out.dir/final, tera ckpt import)
  if (!meta) return meta.status();
  *model = meta->model;
  const ModelSpec spec(meta->model);
  const std::string path = (fs::path(dir) / "model.safetensors").string();
  auto file = SafetensorsFile::open(path);
  if (!file) return file.status();
  if (meta->tensors_crc32 && *meta->tensors_crc32 != file->crc32()) {
    return Status::error(path + fmt::format(": checksum mismatch (file {:08x}, meta.json {:08x}); the file is corrupt",
                                            file->crc32(), *meta->tensors_crc32));
  }
  for (const ParamInfo& p : spec.params()) {
    GlobalTensor t{p.name, p.shape, std::vector<float>(static_cast<size_t>(numel(p.shape)))};
    TERA_RETURN_IF_ERROR(read_named_tensor(*file, p, t.data.data()));
    out.push_back(std::move(t));
  }
  return out;
}

Status export_hf_gpt2(const std::vector<GlobalTensor>& weights, const ModelConfig& model, const std::string& path) {
  if (model.mlp != MlpKind::standard || model.kv() != model.heads) {
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
  const json cfg = {{"architectures", {"GPT2LMHeadModel"}},
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
  const fs::path parent = fs::path(path).has_parent_path() ? fs::path(path).parent_path() : fs::path(".");
  const std::string text = cfg.dump(2) + "\n";
  auto f = AtomicFile::create((parent / "config.json").string());
  if (!f) return f.status();
  TERA_RETURN_IF_ERROR(f->write(text.data(), text.size()));
  return f->commit();
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
  m.heads = heads;
  if (m.heads <= 0) {
    const fs::path cfg_path = fs::path(file.path()).parent_path() / "config.json";
    auto bytes = read_file(cfg_path.string());
    if (bytes) {
      json j = json::parse(bytes->begin(), bytes->end(), nullptr, false);
      if (!j.is_discarded() && j.contains("n_head") && j["n_head"].is_number_integer()) m.heads = j["n_head"].get<int64_t>();
    }
  }
  if (m.heads <= 0) {
    return Status::error(file.path() + ": the number of heads is not in the tensors; put GPT2Config's config.json "
                                       "beside the file or pass --heads");
  }
  if (Status s = validate_model_config(m); !s) return Status::error(file.path() + ": " + s.message());
  return m;
}

}  // namespace tera
