// GPT-2 on one process: hand-written forward and backward over preallocated
// buffers (DESIGN.md invariant 4). Every buffer comes from a ModelSpec table
// and is carved out of one arena per class, allocated before step 1.
//
// Shape legend: B = micro-batch, T = sequence, C = hidden, H = heads,
// F = ffn hidden, Vp = padded vocabulary. Per block (pre-LayerNorm):
//   ln1  = LN(x)                      [B,T,C]    qkv  = ln1 @ Wqkv^T + b  [B,T,3C]
//   atty = attention(qkv)             [B,T,C]    res1 = x + atty @ Wo^T + b
//   ln2  = LN(res1)                   [B,T,C]    fch  = ln2 @ Wfc^T + b   [B,T,F]
//   out  = res1 + gelu(fch) @ Wfp^T + b           [B,T,C]
// Head: logits = LN_f(x_L) @ wte^T [B,T,Vp]; loss = cross-entropy. The head's
// backward runs eagerly inside the forward (the logits never outlive it), so
// only dx_head [B,T,C] is kept per micro-batch.
#pragma once

#include <cstdint>

#include "core/arena.h"
#include "kernels/backend.h"
#include "model/model_spec.h"
#include "model/param_table.h"

namespace tera {

struct MemoryReport {
  int64_t params = 0, grads = 0, optimizer = 0, activations = 0, workspace = 0;
  int64_t total() const { return params + grads + optimizer + activations + workspace; }
};

class Gpt {
 public:
  // Buffers for micro-batches of up to `max_batch` sequences of up to seq_len tokens.
  Gpt(const ModelSpec& spec, const Backend& backend, int64_t max_batch);
  Gpt(const Gpt&) = delete;
  Gpt& operator=(const Gpt&) = delete;

  const ModelSpec& spec() const { return spec_; }
  const ParamTable& table() const { return table_; }
  float* params() { return params_.base(); }
  const float* params() const { return params_.base(); }
  float* grads() { return grads_.base(); }
  int64_t max_batch() const { return max_batch_; }

  void init_parameters(uint64_t seed);
  void zero_grads();

  // One micro-batch: forward, loss, backward; gradients accumulate (+=) scaled
  // by dloss (the caller passes 1 / tokens in the global batch, so the sum
  // over micro-batches is the gradient of the mean loss). tokens, targets:
  // [B,T]. Returns the sum of the B*T per-token losses.
  double forward_backward(const int32_t* tokens, const int32_t* targets, int64_t B, int64_t T, float dloss);
  // Forward and loss only (evaluation). Returns the sum of per-token losses.
  double forward_loss(const int32_t* tokens, const int32_t* targets, int64_t B, int64_t T);
  // Logits [B,T,Vp] of every position (no loss); valid until the next call.
  const float* logits(const int32_t* tokens, int64_t B, int64_t T);
  // Logits [Vp] of the last position of one sequence tokens[T] (generation).
  const float* last_logits(const int32_t* tokens, int64_t T);

  MemoryReport memory() const;  // bytes held by each buffer class

 private:
  struct BlockWeights {
    float *ln1_g, *ln1_b, *qkv_w, *qkv_b, *proj_w, *proj_b, *ln2_g, *ln2_b, *fc_w, *fc_b, *fcp_w, *fcp_b;
  };
  struct BlockActs {
    float *ln1, *ln1_mean, *ln1_rstd, *qkv, *probs, *atty, *res1, *ln2, *ln2_mean, *ln2_rstd, *fch, *fch_gelu,
        *out;
  };
  struct HeadActs {
    int32_t *tokens, *targets;
    float *embed_out, *losses, *dx_head;
  };
  struct Workspace {
    float *lnf, *lnf_mean, *lnf_rstd, *logits, *dres, *dwide, *dnarrow;
  };

  BlockWeights block_weights(float* base, int64_t layer) const;
  void embed_forward(int64_t B, int64_t T);
  void block_forward(int64_t l, const float* x, int64_t B, int64_t T);
  // dres holds d(out of block l) on entry and d(input of block l) on exit.
  void block_backward(int64_t l, const float* x, float* dres, int64_t B, int64_t T);
  // LN_f + logits + loss; with dloss != 0 also the head backward into dx_head.
  double head_forward(const float* x, int64_t B, int64_t T, float dloss, bool backward);
  const float* block_input(int64_t l) const;

  ModelSpec spec_;
  const Backend& be_;
  int64_t max_batch_;
  ParamTable table_;
  Arena params_, grads_, acts_, work_;
  std::vector<BlockActs> blocks_;
  HeadActs head_{};
  Workspace ws_{};
  // Shortcuts into params_/grads_.
  float *wte_, *wpe_, *lnf_g_, *lnf_b_;
  float *dwte_, *dwpe_, *dlnf_g_, *dlnf_b_;
};

}  // namespace tera
