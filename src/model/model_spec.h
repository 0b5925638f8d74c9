// ModelSpec: the one source of truth for GPT model math (DESIGN.md invariant 2).
// It owns the parameter table (name, global shape, init, weight decay), the
// parameter count, FLOPs per token and the per-micro-batch activation table.
// The runtime allocates from these tables and the planner sums them, so the
// two can never disagree. Pure: depends on core only.
//
// Shape legend: L = layers, C = hidden, H = heads, hs = C/H, F = ffn hidden
// (4C for GPT-2), KV = key/value heads (H unless grouped-query), T = sequence length, V = vocabulary, Vp = V padded to a
// multiple of vocab_align (padding rows are zero, masked out of the softmax,
// and never saved), B = micro-batch size.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/recompute.h"
#include "core/rope_params.h"
#include "core/status.h"
#include "core/tensor.h"

namespace tera {

// Feed-forward block: standard is GPT-2's two matrices with GELU; gated is
// Llama's three (SwiGLU: down(act(gate(x)) * up(x))).
enum class MlpKind { standard, gated };
const char* mlp_kind_name(MlpKind k);                       // "standard", "gated"
Expected<MlpKind> parse_mlp_kind(const std::string& name);  // message names model.mlp

// The block's architecture. gpt2: LayerNorm with bias, learned positions,
// GELU MLP, biases on every linear layer, embeddings tied. llama: RMSNorm,
// rotary positions (no position table), gated SwiGLU MLP, no biases,
// embeddings untied by default (Touvron et al. 2023).
enum class Arch { gpt2, llama };
const char* arch_name(Arch a);                       // "gpt2", "llama"
Expected<Arch> parse_arch(const std::string& name);  // message names model.arch

// How the runtime computes attention (kernels/ops.h): naive keeps the T x T
// probabilities for backward, flash keeps only the row log-sum-exp and
// recomputes (Dao et al. 2022). Same model, same parameters: checkpoints
// move freely between the two.
enum class AttentionKind { naive, flash };
const char* attention_kind_name(AttentionKind k);                       // "naive", "flash"
Expected<AttentionKind> parse_attention_kind(const std::string& name);  // message names model.attention

struct ModelConfig {
  int64_t layers = 0;
  int64_t hidden = 0;
  int64_t heads = 0;
  int64_t seq_len = 0;
  int64_t vocab = 0;
  int64_t ffn_hidden = 0;   // 0 means 4 * hidden
  int64_t vocab_align = 64; // embedding rows are padded to a multiple of this
  int64_t kv_heads = 0;     // 0 means heads; fewer is grouped-query attention (Llama 2/3)
  MlpKind mlp = MlpKind::standard;  // llama: gated (the config parser sets it)
  Arch arch = Arch::gpt2;
  double rope_theta = 10000;  // llama: rotary base (model.rope_theta)
  // llama: Llama 3.1's "llama3" rope_scaling (model.rope_scaling = "llama3";
  // core/rope_params.h has the formula). Off, the fields are not the model's.
  struct RopeScaling {
    bool llama3 = false;
    double factor = 8;                      // model.rope_factor
    double low_freq_factor = 1;             // model.rope_low_freq_factor
    double high_freq_factor = 4;            // model.rope_high_freq_factor
    int64_t original_max_positions = 8192;  // model.rope_original_seq_len
    bool operator==(const RopeScaling& o) const {
      return llama3 == o.llama3 && (!llama3 || (factor == o.factor && low_freq_factor == o.low_freq_factor &&
                                                high_freq_factor == o.high_freq_factor &&
                                                original_max_positions == o.original_max_positions));
    }
  };
  RopeScaling rope_scaling{};
  double norm_eps = 1e-5;     // llama: RMSNorm epsilon (model.norm_eps; GPT-2's LayerNorm has its own 1e-5)
  // Input and output embeddings shared; unset: tied for GPT-2 (standard MLP),
  // untied for Llama and the gated-MLP shapes (model.tie_embeddings).
  int tie_embeddings = -1;
  // A runtime choice, not part of the model's identity (==). Flash by
  // default: it equals naive to fp32 rounding (tests/model/test_gpt_gradcheck,
  // tests/train: every layout) and keeps no T x T matrix.
  AttentionKind attention = AttentionKind::flash;

  int64_t ffn() const { return ffn_hidden > 0 ? ffn_hidden : 4 * hidden; }
  int64_t head_size() const { return hidden / heads; }
  int64_t kv() const { return kv_heads > 0 ? kv_heads : heads; }
  // Output width of the fused QKV projection: (heads + 2 kv) * head size (3C without GQA).
  int64_t qkv_width() const { return (heads + 2 * kv()) * head_size(); }
  int64_t mlp_matrices() const { return mlp == MlpKind::gated ? 3 : 2; }
  bool tied() const { return tie_embeddings < 0 ? (arch == Arch::gpt2 && mlp == MlpKind::standard) : tie_embeddings == 1; }
  bool biases() const { return arch == Arch::gpt2; }
  // What the rotary kernels take: theta and, when on, the llama3 scaling.
  RopeParams rope() const {
    RopeParams p;
    p.theta = rope_theta;
    if (rope_scaling.llama3) {
      p.factor = rope_scaling.factor;
      p.low_freq_factor = rope_scaling.low_freq_factor;
      p.high_freq_factor = rope_scaling.high_freq_factor;
      p.original_max_positions = static_cast<double>(rope_scaling.original_max_positions);
    }
    return p;
  }
  // Same model: ffn_hidden = 0 and ffn_hidden = 4 * hidden are the same model
  // (likewise kv_heads = 0 and kv_heads = heads).
  bool operator==(const ModelConfig& o) const {
    return layers == o.layers && hidden == o.hidden && heads == o.heads && seq_len == o.seq_len &&
           vocab == o.vocab && ffn() == o.ffn() && vocab_align == o.vocab_align && kv() == o.kv() && mlp == o.mlp &&
           arch == o.arch && tied() == o.tied() &&
           (arch != Arch::llama ||
            (rope_theta == o.rope_theta && rope_scaling == o.rope_scaling && norm_eps == o.norm_eps));
  }
};

// Checks the shape is a GPT this runtime can build; the message names the
// config key (model.<field>) and the fix.
Status validate_model_config(const ModelConfig& cfg);

// The runtime (model/gpt.h) builds GPT-2 and Llama blocks; the planner also
// takes hybrid shapes (a gated MLP on a GPT-2 block). Fails, naming the key
// and the fix, for a shape only the planner understands.
Status check_runtime_supports(const ModelConfig& cfg);

enum class InitKind { normal, zeros, ones };

// How a parameter is split across the tensor-parallel group (Megatron):
//   none  replicated on every tp rank;
//   rows  dim 0 split: column-parallel weights [out, in] and their biases, the
//         vocab-parallel embedding. Rows are in contiguous groups (q | k | v
//         for the fused QKV projection) and each group splits evenly, so a
//         rank holds its heads of q, of k and of v;
//   cols  dim 1 split: row-parallel weights [out, in] (input features).
enum class TpSplit { none, rows, cols };

struct ParamInfo {
  std::string name;   // GPT-2 style for both architectures: "h.3.attn.c_attn.weight" (ckpt/ maps to Hugging Face)
  Shape shape;        // logical global shape (what checkpoints hold)
  Shape alloc_shape;  // allocated global shape at tp = 1 (vocab rows padded)
  InitKind init = InitKind::normal;
  float init_std = 0.0f;
  bool weight_decay = false;  // true for weight matrices and embeddings only
  int layer = -1;             // -1 embeddings, 0..L-1 blocks, L final norm
  TpSplit tp_split = TpSplit::none;
  bool token_embedding = false;     // wte: vocab-parallel rows (the LM head too, when tied)
  bool output_embedding = false;    // lm_head (untied): vocab-parallel rows, on the head's stage
  std::vector<int64_t> row_groups;  // rows split: sizes of the contiguous row groups (sum = rows)
  // Row groups 1 and 2 are key/value heads (the fused QKV projection): when
  // tp exceeds kv_heads each tp rank holds one whole key/value head,
  // replicated on tp / kv_heads ranks (ModelSpec::kv_replicas).
  bool kv_row_groups = false;
  // Replicated, but under sequence parallelism each tp rank sees only its
  // tokens, so the gradient is partial and all-reduced over tp (LayerNorms,
  // position embeddings).
  bool sp_partial_grad = false;
};

// A buffer in an activation or workspace table.
struct BufferInfo {
  std::string name;
  Shape shape;
  DType dtype = DType::f32;
  bool head_only = false;  // workspace the LM head alone uses (a stage without the head need not hold it)
  int64_t bytes() const { return numel(shape) * dtype_bytes(dtype); }
};

// Recompute (none, selective, full) is core/recompute.h's.

// How activations are laid out and kept; the defaults are what tera's CPU
// runtime does. tp splits heads, qkv, atty and the MLP width across the
// tensor-parallel group; sequence_parallel also splits the sequence dim of
// everything between the tensor-parallel regions (LayerNorm inputs/outputs,
// residual stream). Recompute (Korthikanti et al. 2022): selective drops the
// attention-score buffers (recomputed from q, k in backward), full keeps only
// each block's input and recomputes the block. flash_attention keeps the
// softmax statistics [B,H,T] instead of the T x T probabilities; dropout adds
// the 1-byte masks (and the dropped probabilities) Megatron keeps. gemm =
// bf16 (tera's train.precision = "bf16"): the linear layers take bf16
// inputs, and the two norm outputs, qkv and atty (with flash attention) and
// the MLP's tensors (fch, fch_gate, fch_gelu / fch_swiglu) are kept in bf16; the
// others keep dtype, and the
// rest of the linear inputs (atty, the final norm's output) are rounded
// into the workspace's cast buffers.
struct ActivationOptions {
  int64_t tp = 1;
  bool sequence_parallel = false;
  Recompute recompute = Recompute::none;
  DType dtype = DType::f32;
  bool flash_attention = false;
  bool dropout = false;
  DType gemm = DType::f32;  // the linear layers' input dtype: f32 or bf16
  // Context-parallel ranks of each sequence (partition/context_split.h): the
  // tables' T is then the local seq_len / cp, and the workspace holds the
  // ring attention's buffers.
  int64_t cp = 1;
  // The zero-bubble schedule (zb-h1) splits each block's backward into B
  // (input gradients) and W (weight gradients, run later): a block then also
  // keeps, from its B to its W, each linear layer's output gradient and its
  // norms' parameter gradients (saved_block_activations' "dw_" tensors).
  // Not with full recomputation (its working set is gone by W).
  bool defer_weight_grads = false;
};

class ModelSpec {
 public:
  explicit ModelSpec(ModelConfig cfg);

  const ModelConfig& config() const { return cfg_; }
  // Embedding rows: the vocabulary rounded up to a multiple of
  // vocab_align * tp, so each tensor-parallel shard is vocab_align-aligned.
  int64_t padded_vocab(int64_t tp = 1) const { return round_up(cfg_.vocab, cfg_.vocab_align * tp); }
  // The shape of parameter p on one of tp ranks (its tp_split: rows split per
  // row group, the vocab-parallel embedding over padded_vocab(tp) rows; cols
  // split; none replicated). ParamTable allocates it; the planner counts it.
  Shape local_shape(const ParamInfo& p, int64_t tp) const;

  // Every parameter tensor, in storage order: the root unit (wpe, ln_f, wte)
  // then h.0 ... h.{L-1}. Within a unit, tensors with sp_partial_grad come
  // first, then the other replicated ones, then the tensor-parallel splits.
  const std::vector<ParamInfo>& params() const { return params_; }
  int64_t num_params() const;        // logical (what users count), tied wte counted once
  int64_t num_params_alloc() const;  // including vocab padding rows

  // Model FLOPs per token of one training step (forward + backward), with
  // Megatron's conventions (Narayanan et al. 2021, eq. 3): matmuls only,
  // 2 FLOPs per multiply-add, attention scores counted over the full T x T
  // square. Per layer, forward: 2*(Q*C + C*C + m*C*F) + 2*2*T*C with Q the
  // QKV width (3C; (H + 2 KV) * hs with grouped-query attention) and m the
  // MLP matrices (2; 3 gated), which is 2*(3C*C + C*C + 2*C*F) + 4TC for GPT-2; LM head
  // forward: 2*C*V. Training = 3 x forward (backward = 2 x forward); with full
  // recompute the layers run forward twice, so layers count 4 x, the head 3 x.
  double forward_flops_per_token() const;
  // QKV projection width on one tensor-parallel rank: its heads/tp query
  // heads and kv_heads_local key/value heads (3C/tp without grouped-query
  // attention).
  int64_t qkv_width_local(int64_t tp) const;
  // Key/value heads a tensor-parallel rank holds: kv_heads / tp when tp
  // divides them; else one (tp a multiple of kv_heads), the one its query
  // heads read, replicated on kv_replicas(tp) = tp / kv_heads ranks whose
  // gradients for it are summed (parallel/zero.cpp).
  int64_t kv_heads_local(int64_t tp) const;
  int64_t kv_replicas(int64_t tp) const;
  // Rows of row group `g` of `p` one tp rank holds, and which share of the
  // group tp rank `tp_rank` holds (its index among the group's tp shares).
  int64_t group_rows_local(const ParamInfo& p, size_t g, int64_t tp) const;
  int64_t group_share(const ParamInfo& p, size_t g, int64_t tp, int64_t tp_rank) const;
  double train_flops_per_token(bool full_recompute = false) const;

  // Everything one block's forward produces for a micro-batch of B sequences
  // of length T on one rank (see model/gpt.h for how each buffer is used).
  // Without dropout this is Korthikanti et al.'s 34sbh + 5as^2b less the
  // masks: 32sbh + 2as^2b bytes at 16 bits, with their tp / sp divisions.
  std::vector<BufferInfo> block_activations(int64_t B, int64_t T, const ActivationOptions& o = {}) const;
  // What a block keeps from forward to backward under o.recompute, and with
  // o.defer_weight_grads, from its B pass to its W pass:
  //   dw_qkv [B,T,Ql], dw_proj [B,T,C], dw_fc [B,T,Fl], dw_gate [B,T,Fl]
  //   (gated MLP), dw_fcp [B,T,C]: each linear layer's output gradient over
  //   all the micro-batch's tokens, fp32; dw_ln1_g, dw_ln2_g [C] (and
  //   dw_ln1_b, dw_ln2_b with LayerNorm): the norms' parameter gradients.
  std::vector<BufferInfo> saved_block_activations(int64_t B, int64_t T, const ActivationOptions& o = {}) const;
  // What one micro-batch keeps at a pipeline chunk's boundaries: its input
  // (the embedding output, or the activation received), the token ids (with
  // the embedding), targets, losses and the head's input gradient (with the
  // head), the received output gradient (without the head) and the input
  // gradient to send (without the embedding).
  std::vector<BufferInfo> chunk_activations(int64_t B, int64_t T, const ActivationOptions& o, bool embedding,
                                            bool head) const;
  // Scratch shared by all micro-batches (backward temporaries, logits over
  // the local vocabulary shard).
  std::vector<BufferInfo> workspace(int64_t B, int64_t T, const ActivationOptions& o = {}) const;

  // Bytes one tensor-parallel rank sends (ring model, comm/communicator.h:
  // all-reduce 2(p-1)/p S, all-gather and reduce-scatter (p-1)/p S) for one
  // micro-batch through `layers` blocks, plus the embedding and/or the LM head
  // if this stage has them, forward and backward, fp32 activations:
  //   per layer: 4 all-reduces of [B,T,C] without sequence parallelism;
  //              10 shard all-gathers / reduce-scatters with it (the two
  //              LayerNorm outputs are gathered again in backward; those
  //              4 gathers move bf16 under bf16 GEMMs);
  //   embedding: 1 all-reduce (sp: reduce-scatter + all-gather);
  //   head:      1 all-reduce of d(LN_f out) (sp: all-gather + reduce-scatter)
  //              + the vocab-parallel loss: all-reduce max [B,T] and sum [2,B,T].
  // Full recomputation repeats each layer's forward collectives in backward.
  // The sequence-parallel LayerNorm / position gradient all-reduce is per
  // reduction, not per micro-batch, and is not included.
  int64_t tp_bytes_per_micro_batch(int64_t B, int64_t T, const ActivationOptions& o, int64_t layers, bool embedding,
                                   bool head) const;

 private:
  ModelConfig cfg_;
  std::vector<ParamInfo> params_;
};

// Sum of buffer sizes, each rounded up to 64 bytes (the arena alignment:
// ArenaLayout::aligned_bytes).
int64_t table_bytes(const std::vector<BufferInfo>& table);

}  // namespace tera
