// ModelSpec: the one source of truth for GPT model math (DESIGN.md invariant 2).
// It owns the parameter table (name, global shape, init, weight decay), the
// parameter count, FLOPs per token and the per-micro-batch activation table.
// The runtime allocates from these tables and the planner sums them, so the
// two can never disagree. Pure: depends on core only.
//
// Shape legend: L = layers, C = hidden, H = heads, hs = C/H, F = ffn hidden
// (4C for GPT-2), T = sequence length, V = vocabulary, Vp = V padded to a
// multiple of vocab_align (padding rows are zero, masked out of the softmax,
// and never saved), B = micro-batch size.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/status.h"
#include "core/tensor.h"

namespace tera {

struct ModelConfig {
  int64_t layers = 0;
  int64_t hidden = 0;
  int64_t heads = 0;
  int64_t seq_len = 0;
  int64_t vocab = 0;
  int64_t ffn_hidden = 0;   // 0 means 4 * hidden
  int64_t vocab_align = 64; // embedding rows are padded to a multiple of this

  int64_t ffn() const { return ffn_hidden > 0 ? ffn_hidden : 4 * hidden; }
  int64_t head_size() const { return hidden / heads; }
  // Same model: ffn_hidden = 0 and ffn_hidden = 4 * hidden are the same model.
  bool operator==(const ModelConfig& o) const {
    return layers == o.layers && hidden == o.hidden && heads == o.heads && seq_len == o.seq_len &&
           vocab == o.vocab && ffn() == o.ffn() && vocab_align == o.vocab_align;
  }
};

// Checks the shape is a GPT this runtime can build; the message names the
// config key (model.<field>) and the fix.
Status validate_model_config(const ModelConfig& cfg);

enum class InitKind { normal, zeros, ones };

struct ParamInfo {
  std::string name;   // Hugging Face GPT-2 style: "h.3.attn.c_attn.weight"
  Shape shape;        // logical global shape (what checkpoints hold)
  Shape alloc_shape;  // allocated global shape (vocab rows padded)
  InitKind init = InitKind::normal;
  float init_std = 0.0f;
  bool weight_decay = false;  // true for weight matrices and embeddings only
  int layer = -1;             // -1 embeddings, 0..L-1 blocks, L final norm
};

// A buffer in an activation or workspace table.
struct BufferInfo {
  std::string name;
  Shape shape;
  DType dtype = DType::f32;
  int64_t bytes() const { return numel(shape) * dtype_bytes(dtype); }
};

enum class Recompute { none, selective, full };
const char* recompute_name(Recompute r);

// How activations are laid out and kept; the defaults are what tera's CPU
// runtime does. tp splits heads, qkv, atty and the MLP width across the
// tensor-parallel group; sequence_parallel also splits the sequence dim of
// everything between the tensor-parallel regions (LayerNorm inputs/outputs,
// residual stream). Recompute (Korthikanti et al. 2022): selective drops the
// attention-score buffers (recomputed from q, k in backward), full keeps only
// each block's input and recomputes the block. flash_attention keeps the
// softmax statistics [B,H,T] instead of the T x T probabilities; dropout adds
// the 1-byte masks (and the dropped probabilities) Megatron keeps.
struct ActivationOptions {
  int64_t tp = 1;
  bool sequence_parallel = false;
  Recompute recompute = Recompute::none;
  DType dtype = DType::f32;
  bool flash_attention = false;
  bool dropout = false;
};

class ModelSpec {
 public:
  explicit ModelSpec(ModelConfig cfg);

  const ModelConfig& config() const { return cfg_; }
  int64_t padded_vocab() const { return padded_vocab_; }

  // Every parameter tensor, in storage order: wte, wpe, h.0 ... h.{L-1}, ln_f.
  const std::vector<ParamInfo>& params() const { return params_; }
  int64_t num_params() const;        // logical (what users count), tied wte counted once
  int64_t num_params_alloc() const;  // including vocab padding rows

  // Model FLOPs per token of one training step (forward + backward), with
  // Megatron's conventions (Narayanan et al. 2021, eq. 3): matmuls only,
  // 2 FLOPs per multiply-add, attention scores counted over the full T x T
  // square. Per layer, forward: 2*(3C*C + C*C + 2*C*F) + 2*2*T*C; LM head
  // forward: 2*C*V. Training = 3 x forward (backward = 2 x forward); with full
  // recompute the layers run forward twice, so layers count 4 x, the head 3 x.
  double forward_flops_per_token() const;
  double train_flops_per_token(bool full_recompute = false) const;

  // Everything one block's forward produces for a micro-batch of B sequences
  // of length T on one rank (see model/gpt.h for how each buffer is used).
  // Without dropout this is Korthikanti et al.'s 34sbh + 5as^2b less the
  // masks: 32sbh + 2as^2b bytes at 16 bits, with their tp / sp divisions.
  std::vector<BufferInfo> block_activations(int64_t B, int64_t T, const ActivationOptions& o = {}) const;
  // What a block keeps from forward to backward under o.recompute.
  std::vector<BufferInfo> saved_block_activations(int64_t B, int64_t T, const ActivationOptions& o = {}) const;
  // Embedding output, token ids and the per-token losses of a micro-batch.
  std::vector<BufferInfo> head_activations(int64_t B, int64_t T, const ActivationOptions& o = {}) const;
  // Scratch shared by all micro-batches (backward temporaries, logits over
  // the local vocabulary shard).
  std::vector<BufferInfo> workspace(int64_t B, int64_t T, const ActivationOptions& o = {}) const;

  // Bytes one micro-batch keeps through `layers` blocks (the whole model by
  // default) plus the head tables; with full recompute also one block's
  // working set. Buffers are counted as the runtime allocates them (each
  // rounded up to 64 bytes).
  int64_t activation_bytes(int64_t B, int64_t T, const ActivationOptions& o = {}, int64_t layers = -1) const;
  int64_t workspace_bytes(int64_t B, int64_t T, const ActivationOptions& o = {}) const;

 private:
  ModelConfig cfg_;
  int64_t padded_vocab_;
  std::vector<ParamInfo> params_;
};

// Sum of buffer sizes, each rounded up to 64 bytes (the arena alignment).
int64_t table_bytes(const std::vector<BufferInfo>& table);

}  // namespace tera
