// Weights in and out of tera: global tensors by name from any tera
// checkpoint kind, and the Hugging Face GPT-2 layout.
//
// Hugging Face GPT-2 (transformers' GPT2LMHeadModel) names and layouts:
//   transformer.wte.weight            [V, C]   = tera wte.weight
//   transformer.wpe.weight            [P, C]   = tera wpe.weight (P >= seq_len;
//                                              import keeps the first seq_len rows)
//   transformer.h.<l>.ln_1.{weight,bias}, ln_2.*, transformer.ln_f.*  = tera's
//   transformer.h.<l>.attn.c_attn.weight  [C, 3C]  Conv1D stores (in, out):
//   transformer.h.<l>.attn.c_proj.weight  [C, C]   the transpose of tera's
//   transformer.h.<l>.mlp.c_fc.weight     [C, F]   (out, in) linear weights
//   transformer.h.<l>.mlp.c_proj.weight   [F, C]
//   biases as tera's; lm_head.weight [V, C] = tera's lm_head.weight when the
//   model is untied (tie_word_embeddings = false), else tied to wte and not stored.
// GPT2Config's fields that change the function (activation_function,
// layer_norm_epsilon, scale_attn_weights, scale_attn_by_inverse_layer_idx)
// must be what tera computes, or the import is refused naming the field.
// Weights may be F32, BF16 or F16; a non-finite one is refused by tensor.
// Import also accepts the names without the "transformer." prefix (the
// original gpt2 checkpoints) and ignores the attn.bias / attn.masked_bias
// mask buffers older files carry.
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "ckpt/safetensors.h"
#include "core/status.h"
#include "model/model_spec.h"

namespace tera {

// One global tensor, by tera name.
struct GlobalTensor {
  std::string name;
  Shape shape;
  std::vector<float> data;
};

// Every parameter of a model source (ckpt/model_source.h: a step-N, a
// ckpt.dir, a tera-model directory or a safetensors file), in ModelSpec
// order; *model receives its config.
Expected<std::vector<GlobalTensor>> read_global_weights(const std::string& path, ModelConfig* model);

// `param` from a file holding tera names (F32, exact shape).
Status read_named_tensor(const SafetensorsFile& file, const ParamInfo& param, float* out);
// `param` from a tera file (metadata format = "tera", e.g. a tera-model's
// model.safetensors) or else a Hugging Face GPT-2 file.
Status read_hf_or_tera_tensor(const SafetensorsFile& file, const ParamInfo& param, float* out);

// The Hugging Face name of a tera parameter and whether it is stored transposed.
std::pair<std::string, bool> hf_gpt2_name(const std::string& tera_name);

// How an export writes its weights (both layouts).
struct HfExportOptions {
  int64_t eot = -1;     // the tokenizer's end-of-text id, written as bos/eos_token_id (-1: none)
  bool bf16 = false;    // BF16 tensors, rounded to nearest even (torch_dtype "bfloat16"); else F32
  uint64_t max_shard_bytes = 5'000'000'000;  // above it: shards + index (safetensors_index.h), as Hugging Face
};

// The fp32 tensors `f32` written as `path` or its shards (safetensors_index.h)
// in the dtype `opt` asks; returns the files written (an index last).
Expected<std::vector<std::string>> write_hf_weights(const std::vector<StTensorRef>& f32, const std::string& path,
                                                    const HfExportOptions& opt);

// Writes `weights` (a GPT-2 shaped model) as a safetensors file (or shards)
// with Hugging Face names and layouts, plus config.json (GPT2Config) beside
// it. Fails for shapes GPT-2 cannot express (gated MLP, grouped-query
// attention). Returns the weight files written.
Expected<std::vector<std::string>> export_hf_gpt2(const std::vector<GlobalTensor>& weights, const ModelConfig& model,
                                                  const std::string& path, const HfExportOptions& opt = {});

// Writes config.json beside the weights file `weights_path`, atomically.
Status write_config_beside(const std::string& weights_path, const std::string& json_text);

// "'a', 'b', 'c'" (the first `max` names, then "and N more"), for messages.
std::string quoted_names(const std::vector<std::string>& names, size_t max = 5);

// Model config of a Hugging Face GPT-2 safetensors file, inferred from its
// tensor shapes (layers, hidden, vocab, positions, ffn); heads come from
// config.json beside the file, or `heads` if given (> 0). A config.json
// beside the file must agree with the tensors: n_layer, n_embd, n_head,
// vocab_size, n_positions and n_inner are checked, and a mismatch names the
// field and the file.
Expected<ModelConfig> infer_hf_gpt2_config(const SafetensorsFile& file, int64_t heads);

// Every tensor of the file must be one import reads (`spec`'s parameters,
// lm_head.weight of an untied spec) or one it may drop without loss: the
// attention-mask buffers, and an lm_head.weight identical to wte.weight (a
// tied head stored twice). A head that differs for a tied spec is refused,
// and so are tensors no layer of `spec` has (e.g. layers past n_layer).
Status check_hf_gpt2_tensors(const SafetensorsFile& file, const ModelSpec& spec);

}  // namespace tera
