// The Hugging Face Llama layout (transformers' LlamaForCausalLM), in and out.
//
// Names and shapes (Linear weights are [out, in], as tera's: no transpose):
//   model.embed_tokens.weight                     [V, C]      = wte.weight
//   model.layers.<l>.input_layernorm.weight       [C]         = h.<l>.ln_1.weight
//   model.layers.<l>.self_attn.q_proj.weight      [H hs, C]   rows of h.<l>.attn.c_attn.weight:
//   model.layers.<l>.self_attn.k_proj.weight      [KV hs, C]  q, then k, then v, heads in order
//   model.layers.<l>.self_attn.v_proj.weight      [KV hs, C]
//   model.layers.<l>.self_attn.o_proj.weight      [C, H hs]   = h.<l>.attn.c_proj.weight
//   model.layers.<l>.post_attention_layernorm.weight [C]      = h.<l>.ln_2.weight
//   model.layers.<l>.mlp.gate_proj.weight         [F, C]      = h.<l>.mlp.c_gate.weight
//   model.layers.<l>.mlp.up_proj.weight           [F, C]      = h.<l>.mlp.c_fc.weight
//   model.layers.<l>.mlp.down_proj.weight         [C, F]      = h.<l>.mlp.c_proj.weight
//   model.norm.weight                             [C]         = ln_f.weight
//   lm_head.weight                                [V, C]      = lm_head.weight (untied;
//                                                 a tied model stores none)
// The rotary embedding is the rotate-half form Hugging Face's weights are laid
// out for (kernels/cpu/rope.cpp), so q_proj and k_proj need no permutation.
// config.json (LlamaConfig) must be beside the file: heads, key/value heads,
// rope_theta, rope_scaling and rms_norm_eps are not in the tensors. Import
// reads F32, BF16 and F16 tensors into fp32 (exactly), from one file or from
// the shards a model.safetensors.index.json names (SafetensorsFile::open).
// rope_scaling: null, or Llama 3.1's {"rope_type": "llama3", factor,
// low_freq_factor, high_freq_factor, original_max_position_embeddings}
// (core/rope_params.h); another rope_type is refused by name.
#pragma once

#include <string>
#include <vector>

#include "ckpt/hf_gpt2.h"
#include "ckpt/safetensors.h"
#include "core/status.h"
#include "model/model_spec.h"

namespace tera {

// A Hugging Face Llama file: it has model.embed_tokens.weight.
bool is_hf_llama_file(const SafetensorsFile& file);

// The Hugging Face tensor names that hold tera parameter `tera_name` (three
// for the fused QKV matrix: q_proj, k_proj, v_proj).
std::vector<std::string> hf_llama_names(const std::string& tera_name);

// `param` of a Llama model (spec of `model`) from a Hugging Face Llama file;
// the error names the file, the tensor and the shape expected.
Status read_hf_llama_tensor(const SafetensorsFile& file, const ModelConfig& model, const ParamInfo& param, float* out);

// The model of a Hugging Face Llama file: config.json beside it (LlamaConfig)
// checked against the tensors (layers, hidden, vocab, MLP width, key/value
// heads, a tied or separate lm_head); a field that disagrees, or one tera
// cannot run (a rope_scaling other than llama3, biases, another
// activation), names the field.
// seq_len is max_position_embeddings.
Expected<ModelConfig> infer_hf_llama_config(const SafetensorsFile& file);

// Every tensor of the file is one a Llama of `spec` reads (or a rotary
// inv_freq buffer, or an lm_head equal to the embedding of a tied model).
Status check_hf_llama_tensors(const SafetensorsFile& file, const ModelSpec& spec);

// Writes `weights` (a Llama model) as safetensors (or shards, in the dtype
// `opt` asks) with Hugging Face names and config.json (LlamaConfig, with
// rope_scaling) beside it. Returns the weight files written.
Expected<std::vector<std::string>> export_hf_llama(const std::vector<GlobalTensor>& weights, const ModelConfig& model,
                                                   const std::string& path, const HfExportOptions& opt = {});

}  // namespace tera
