// The backend-neutral op set: every op's signature and shape contract. Each
// backend (kernels/cpu, kernels/guarded, kernels/gpu: cuda and gpu-emu from
// one kernel dialect) implements these with identical signatures; model code
// calls them through a Backend object (backend.h), which passes each op its
// own context first (BackendContext: stream, library handles, scratch), and
// never branches on which backend runs.
//
// Shape legend: N = rows (tokens, B*T), B = batch, T = sequence, C = channels
// (local to this rank: C/tp where split), H = heads (local), hs = head size,
// V = vocabulary (real), Vp = padded vocabulary (row count of the embedding).
// Tensors are fp32 unless an op says bf16 (uint16_t: the upper half of an
// fp32 pattern), row-major, outermost dimension first, and live in the
// backend's device memory (allocated by its `alloc`); host code reaches them
// only through `copy`. Arguments documented as host arrays (segment
// descriptors) are host memory whose entries point to device memory. On an
// asynchronous backend an op returns once queued on the compute stream.
//
// Accumulation contract (the backward pass relies on it):
//   gradients of parameters always accumulate (+=);
//   layernorm_backward accumulates into dx (dx holds the residual gradient);
//   every other backward overwrites its input gradient.
#pragma once

#include <cstdint>

#include "core/device_memory.h"
#include "core/rope_params.h"
#include "core/tensor.h"

namespace tera {

class BackendContext;  // backend.h: a backend instance's own state

// C[M,N] = alpha * op(A) @ op(B) + beta * C, op(A): [M,K], op(B): [K,N].
// A is [M,K] (or [K,M] if trans_a), B is [K,N] (or [N,K] if trans_b).
using GemmFn = void (*)(BackendContext* c, bool trans_a, bool trans_b, int64_t M, int64_t N, int64_t K, float alpha,
                        const float* A, int64_t lda, const float* B, int64_t ldb, float beta, float* C,
                        int64_t ldc);

// y[N,O] = x[N,I] @ W[O,I]^T (+ b[O] when b != nullptr).
using LinearForwardFn = void (*)(BackendContext* c, float* y, const float* x, const float* W, const float* b, int64_t N,
                                 int64_t I, int64_t O);
// dx[N,I] = dy @ W (overwrite; += with accumulate_dx: a gated MLP's two
// input projections; skipped if dx == nullptr);
// dW[O,I] += dy^T @ x (skipped if dW == nullptr);
// db[O] += sum_n dy (skipped if db == nullptr).
// Each output is independent of which others are asked for: on one backend
// a call with some of dx, dW, db null writes exactly the bits the call with
// all three writes into those it is given, and nothing else. A zero-bubble
// schedule splits the backward so: B (dx alone; dW, db null), later W
// (dW and db; dx null).
using LinearBackwardFn = void (*)(BackendContext* c, float* dx, float* dW, float* db, const float* dy, const float* x,
                                  const float* W, int64_t N, int64_t I, int64_t O, bool accumulate_dx);

// The same linear layers with bf16 GEMM inputs (train.precision = "bf16"):
// W[O,I] is a bf16 copy of the fp32 weights and x[N,I] the input already in
// bf16 (bf16 values are uint16_t, the upper half of the fp32 pattern; the
// caller keeps x so, or rounds it once with the cast op). The fp32 gradient dy
// is rounded to bf16 (nearest even) into `cast`, device workspace of at
// least N*O bf16 values, and the products accumulate in fp32. Every output
// (y, dx, dW, db) is fp32 and accumulates as in the fp32 ops; db sums the
// fp32 dy. In the backward, as in the fp32 op, dx, dW and db are each
// skipped when null and independent of the others; each call that runs a
// product (dx or dW given) rounds dy into `cast` itself, so nothing of cast
// need be kept between a B call and its W call (cast's contents after a
// call are unspecified).
using LinearForwardBf16Fn = void (*)(BackendContext* c, float* y, const uint16_t* x, const uint16_t* W, const float* b, int64_t N,
                                     int64_t I, int64_t O);
using LinearBackwardBf16Fn = void (*)(BackendContext* c, float* dx, float* dW, float* db, const float* dy, const uint16_t* x,
                                      const uint16_t* W, int64_t N, int64_t I, int64_t O, bool accumulate_dx,
                                      uint16_t* cast);

// The GPT MLP's GELU fused into its two bf16 linear layers (optional: the
// model calls these when a backend has them, else linear_*_bf16 and the
// gelu_*_bf16 ops; the cuda backend runs them as cuBLASLt's GELU epilogues).
//   linear_gelu_forward_bf16: y = x[N,I] @ W[O,I]^T + b[O] accumulated in
//     fp32; pre[N,O] = bf16(y) (the activation's input, kept for backward),
//     act[N,O] = bf16(gelu(y)) (GELU of the fp32 y). work: device workspace
//     of N*O floats that a backend without the fused form stages y in.
//   linear_backward_gelu_bf16: linear_backward_bf16 of a layer whose input
//     x[N,I] = gelu(pre) (the MLP's output projection), with dx replaced by
//     the gradient of pre: dpre[N,I] = (bf16(dy) @ W) * gelu'(pre)
//     (overwrite; always written, never null); dW[O,I] += bf16(dy)^T @ x
//     (skipped if dW == nullptr) and db[O] += sum_n dy (skipped if
//     db == nullptr), cast as in linear_backward_bf16. dpre does not depend
//     on whether dW and db are given, and the dW and db it writes are the
//     bits linear_backward_bf16(nullptr, dW, db, dy, x, W, ...) writes: a
//     zero-bubble schedule's W half of this layer.
using LinearGeluForwardBf16Fn = void (*)(BackendContext* c, uint16_t* act, uint16_t* pre, const uint16_t* x, const uint16_t* W,
                                         const float* b, int64_t N, int64_t I, int64_t O, float* work);
using LinearBackwardGeluBf16Fn = void (*)(BackendContext* c, float* dpre, float* dW, float* db, const float* dy, const uint16_t* x,
                                          const uint16_t* W, const uint16_t* pre, int64_t N, int64_t I, int64_t O,
                                          uint16_t* cast);

// out[N,C] = (x - mean) * rstd * g + b; mean[N], rstd[N] saved for backward.
using LayerNormForwardFn = void (*)(BackendContext* c, float* out, float* mean, float* rstd, const float* x, const float* g,
                                    const float* b, int64_t N, int64_t C);
// dx[N,C] += ..., dg[C] += ..., db[C] += ... from dout[N,C].
using LayerNormBackwardFn = void (*)(BackendContext* c, float* dx, float* dg, float* db, const float* dout, const float* x,
                                     const float* g, const float* mean, const float* rstd, int64_t N,
                                     int64_t C);

// RMSNorm (Llama): out[N,C] = x * rstd * g, rstd[N] = 1/sqrt(mean(x^2) + eps) saved.
using RmsNormForwardFn = void (*)(BackendContext* c, float* out, float* rstd, const float* x, const float* g, int64_t N, int64_t C,
                                  float eps);
// The norms' bf16 forms (train.precision = "bf16", which keeps the norm
// outputs in bf16): the same fp32 arithmetic and statistics, out rounded to
// bf16 (nearest even) as it is written.
using LayerNormForwardBf16Fn = void (*)(BackendContext* c, uint16_t* out, float* mean, float* rstd, const float* x, const float* g,
                                        const float* b, int64_t N, int64_t C);
using RmsNormForwardBf16Fn = void (*)(BackendContext* c, uint16_t* out, float* rstd, const float* x, const float* g, int64_t N,
                                      int64_t C, float eps);
// dx[N,C] += ..., dg[C] += ... from dout[N,C].
using RmsNormBackwardFn = void (*)(BackendContext* c, float* dx, float* dg, const float* dout, const float* x, const float* g,
                                   const float* rstd, int64_t N, int64_t C);

// SwiGLU (Llama's gated MLP): out[n] = silu(gate[n]) * up[n]; backward
// overwrites dgate[n] and dup[n] from dout[n] (dgate may not alias dup).
using SwigluForwardFn = void (*)(BackendContext* c, float* out, const float* gate, const float* up, int64_t n);
using SwigluBackwardFn = void (*)(BackendContext* c, float* dgate, float* dup, const float* gate, const float* up, const float* dout,
                                  int64_t n);
// The bf16 forms (train.precision = "bf16", which keeps the MLP's
// activations in bf16): gate, up and out are bf16, the arithmetic and the
// gradients fp32; out is rounded to nearest even. dup may alias dout.
using SwigluForwardBf16Fn = void (*)(BackendContext* c, uint16_t* out, const uint16_t* gate, const uint16_t* up, int64_t n);
using SwigluBackwardBf16Fn = void (*)(BackendContext* c, float* dgate, float* dup, const uint16_t* gate, const uint16_t* up,
                                      const float* dout, int64_t n);

// Rotary position embeddings (Hugging Face Llama's rotate-half convention),
// in place on the q and k heads of qkv[N,(H+2KV)*hs] (layout as the
// attention's), pair i turned by rope_inv_freq(rope, i, hs) per position
// (core/rope_params.h: theta^(-2i/hs), with Llama 3.1's scaling when
// rope.factor != 1). Row n is at position n mod T, or at pos[n mod T] when
// the position table pos[T] (int32, device; the same for every sequence) is
// given: context parallelism's rank holds two non-contiguous chunks of each
// sequence. A null pos is exactly the table pos[t] = t. The backward rotates
// the q and k gradients in dqkv back (in place).
using RopeFn = void (*)(BackendContext* c, float* qkv, int64_t N, int64_t T, int64_t H, int64_t KV, int64_t hs, RopeParams rope,
                        const int32_t* pos);

// GELU, tanh approximation: out = 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))).
using GeluForwardFn = void (*)(BackendContext* c, float* out, const float* x, int64_t n);
using GeluBackwardFn = void (*)(BackendContext* c, float* dx, const float* x, const float* dout, int64_t n);  // overwrite
// The bf16 forms: x and out bf16 (out rounded to nearest even), the
// arithmetic and dx, dout fp32 (dx may alias dout).
using GeluForwardBf16Fn = void (*)(BackendContext* c, uint16_t* out, const uint16_t* x, int64_t n);
using GeluBackwardBf16Fn = void (*)(BackendContext* c, float* dx, const uint16_t* x, const float* dout, int64_t n);

// Causal self-attention over local heads, with grouped keys and values
// (grouped-query attention: KV key/value heads shared by H query heads; KV = H
// is plain multi-head attention). qkv[B,T,(H+2KV)*hs] holds q (H heads) | k
// (KV heads) | v (KV heads), head j of a part at columns [j*hs, (j+1)*hs) of
// it; query head h attends with key/value head h / (H/KV). out[B,T,H*hs].
// Scores are scaled by 1/sqrt(hs).
//
// naive: the probabilities probs[B,H,T,T] (softmax rows, zero above the
// diagonal) are saved for backward.
using AttentionForwardFn = void (*)(BackendContext* c, float* out, float* probs, const float* qkv, int64_t B, int64_t T, int64_t H,
                                    int64_t KV, int64_t hs);
// dqkv[B,T,(H+2KV)*hs] (overwrite) from dout[B,T,H*hs].
using AttentionBackwardFn = void (*)(BackendContext* c, float* dqkv, const float* dout, const float* qkv, const float* probs,
                                     int64_t B, int64_t T, int64_t H, int64_t KV, int64_t hs);
// flash (Dao et al. 2022): tiles of queries and keys with an online softmax;
// only out and the row log-sum-exp lse[B,H,T] (log of the sum of exp of the
// scaled scores) are saved, no T x T matrix.
using FlashAttentionForwardFn = void (*)(BackendContext* c, float* out, float* lse, const float* qkv, int64_t B, int64_t T, int64_t H,
                                         int64_t KV, int64_t hs);
// dqkv (overwrite) from dout, recomputing each probability from qkv and lse;
// out gives D_t = dout_t . out_t.
using FlashAttentionBackwardFn = void (*)(BackendContext* c, float* dqkv, const float* dout, const float* qkv, const float* out,
                                          const float* lse, int64_t B, int64_t T, int64_t H, int64_t KV, int64_t hs);
// The _bf16 forms (train.precision = "bf16"): qkv, and out as the backward
// reads it, in bf16 (kept so); the forward writes out in fp32; every other
// buffer fp32. The operands of every product are bf16 (q, k, v, and dout,
// the probabilities and the score gradients rounded before they multiply)
// with fp32 accumulation; softmax statistics, lse and D (from the bf16 out)
// stay fp32.
using FlashAttentionForwardBf16Fn = void (*)(BackendContext* c, float* out, float* lse, const uint16_t* qkv, int64_t B, int64_t T,
                                             int64_t H, int64_t KV, int64_t hs);
using FlashAttentionBackwardBf16Fn = void (*)(BackendContext* c, float* dqkv, const float* dout, const uint16_t* qkv, const uint16_t* out,
                                              const float* lse, int64_t B, int64_t T, int64_t H, int64_t KV,
                                              int64_t hs);

// Flash attention of one block of keys (context parallelism's ring
// attention: class cp of backend.h). The local queries come from
// qkv[B,Tq,(H+2KV)*hs] (its q part, as flash_attention_forward reads it);
// the keys and values from a K/V block kv[B,Tk,2*KV*hs]: per token its KV
// key heads then its KV value heads (the k,v part of a qkv row, so a rank
// copies its own slice in: copy_columns). pos_q[Tq] and
// pos_k[Tk] (int32, device) are global token positions, the same for every
// batch row; query t sees key s iff pos_k[s] <= pos_q[t]. GQA and scale as
// in flash_attention_forward; out[B,Tq,H*hs], lse[B,H,Tq] in its layouts.
//   accumulate = false: (out, lse) of this block alone; a row that sees no
//     key gets lse = -inf and out = 0.
//   accumulate = true: this block merged into the (out, lse) already there
//     by log-sum-exp: lse' = log(e^lse + e^lse_b), out' = out e^(lse - lse')
//     + out_b e^(lse_b - lse'); a side with lse = -inf adds nothing and no
//     NaN: a row this block gives no key keeps (out, lse) bit for bit, and a
//     row at lse = -inf that meets a key takes out from this block alone
//     (whatever its out held).
using FlashAttentionBlockForwardFn = void (*)(BackendContext* c, float* out, float* lse, const float* qkv, const float* kv,
                                              const int32_t* pos_q, const int32_t* pos_k, int64_t B, int64_t Tq, int64_t Tk,
                                              int64_t H, int64_t KV, int64_t hs, bool accumulate);
// This block's share of the gradients, ADDED: into the q part of
// dqkv[B,Tq,(H+2KV)*hs] (its k,v part untouched) and into dkv[B,Tk,2*KV*hs]
// (dk then dv, kv's layout). out and lse are the FINAL merged output and lse
// of the local queries over every block; dout[B,Tq,H*hs]; P = exp(scale q.k
// - lse), D_t = dout_t . out_t as in flash_attention_backward.
using FlashAttentionBlockBackwardFn = void (*)(BackendContext* c, float* dqkv, float* dkv, const float* dout, const float* qkv,
                                               const float* kv, const float* out, const float* lse, const int32_t* pos_q,
                                               const int32_t* pos_k, int64_t B, int64_t Tq, int64_t Tk, int64_t H, int64_t KV,
                                               int64_t hs);
// dst[r * ld_dst + c] = src[r * ld_src + c] for r < rows, c < cols (fp32;
// dst and src do not overlap; ld_dst, ld_src >= cols): a block of columns,
// copied exactly. Ring attention (class cp) packs the k,v columns of
// qkv[B*T, (H+2KV)*hs] (src = qkv + H*hs, ld_src = (H+2KV)*hs) into the
// contiguous kv[B*T, 2*KV*hs] it sends (ld_dst = 2*KV*hs), and unpacks dkv
// into dqkv's k,v columns the same way round.
using CopyColumnsFn = void (*)(BackendContext* c, float* dst, int64_t ld_dst, const float* src, int64_t ld_src, int64_t rows,
                               int64_t cols);

// out[n] = a[n] + b[n]   (out may alias a).
using ResidualForwardFn = void (*)(BackendContext* c, float* out, const float* a, const float* b, int64_t n);

// Fused softmax + cross-entropy over the first V of Vp columns (columns >= V
// are padding: excluded from the softmax, gradient 0). losses[N]; targets[N]
// (a target < 0 is ignored: loss 0, gradient 0). Overwrites logits[N,Vp] with
// dlogits = dloss * (softmax - onehot). Returns nothing; losses are per row.
using CrossEntropyFn = void (*)(BackendContext* c, float* losses, float* logits, const int32_t* targets, int64_t N,
                                int64_t V, int64_t Vp, float dloss);
// Softmax probabilities of one row's first V entries (generation).
using SoftmaxRowFn = void (*)(BackendContext* c, float* probs, const float* logits, int64_t V, float temperature);

// out[n,:] = wte_local[tokens[n] - v0, :] if v0 <= tokens[n] < v1, else 0
// (vocab-parallel: this rank holds rows [v0, v1) of the embedding).
using EmbeddingLookupFn = void (*)(BackendContext* c, float* out, const int32_t* tokens, const float* wte_local, int64_t v0, int64_t v1,
                                   int64_t N, int64_t C);
// dwte_local[tokens[n] - v0, :] += dout[n, :] for tokens in [v0, v1).
using EmbeddingLookupBackwardFn = void (*)(BackendContext* c, float* dwte_local, const float* dout, const int32_t* tokens, int64_t v0,
                                           int64_t v1, int64_t N, int64_t C);
// Token i of a run of N flattened tokens starting at global token n0 sits at
// position (n0 + i) mod T: out[i,:] += wpe[pos, :]; backward dwpe[pos,:] += dout[i,:].
using PositionAddFn = void (*)(BackendContext* c, float* out, const float* wpe, int64_t n0, int64_t N, int64_t T, int64_t C);
using PositionAddBackwardFn = void (*)(BackendContext* c, float* dwpe, const float* dout, int64_t n0, int64_t N, int64_t T, int64_t C);

// out[n,c] = a[n,c] + bias[c] + residual[n,c] (bias, residual may be null; out may alias a).
using BiasResidualFn = void (*)(BackendContext* c, float* out, const float* a, const float* bias, const float* residual, int64_t N,
                                int64_t C);

// Cross-entropy in phases, so that a vocabulary split across ranks can reduce
// the row max and the row sum between them (vocab-parallel loss). logits are
// [N, ld] with this rank's columns [v0, v0 + valid) real (valid <= ld; the
// rest padding). Targets < 0 are ignored.
//   ce_max:      rowmax[n] = max of the valid columns (-inf if none)
//   ce_exp_sum:  with the global max m: logits <- exp(l - m) (padding 0);
//                sums[n] = sum of them; target_logit[n] = l[y - v0] if y is local, else 0
//   ce_finalize: with the global Z and l_y: losses[n] = log Z + m - l_y and
//                logits <- dloss * (e / Z - onehot) (the gradient)
using CeMaxFn = void (*)(BackendContext* c, float* rowmax, const float* logits, int64_t N, int64_t valid, int64_t ld);
using CeExpSumFn = void (*)(BackendContext* c, float* sums, float* target_logit, float* logits, const int32_t* targets,
                            const float* rowmax, int64_t N, int64_t valid, int64_t ld, int64_t v0);
using CeFinalizeFn = void (*)(BackendContext* c, float* losses, float* logits, const int32_t* targets, const float* rowmax,
                              const float* sums, const float* target_logit, int64_t N, int64_t valid, int64_t ld,
                              int64_t v0, float dloss);

// --- Memory and ordering: the backend owns tensor memory ------------------

// Device memory of `bytes` bytes, 64-byte aligned, contents undefined;
// nullptr when the device cannot give it (callers turn that into an
// AllocationError naming the buffer class).
using AllocFn = void* (*)(BackendContext* c, int64_t bytes);
using ReleaseFn = void (*)(BackendContext* c, void* p);  // p from alloc (null: nothing)
// dst[0, n) = value converted to t (f32, f64, i32, bf16).
using FillFn = void (*)(BackendContext* c, void* dst, DType t, double value, int64_t n);
// Copies `bytes` bytes, ordered after every op issued before it (CopyKind,
// core/device_memory.h). host_to_device: src may be reused when copy returns
// (an asynchronous backend stages it); device_to_host: dst holds the data
// when copy returns (the host waits for the stream); device_to_device:
// asynchronous where the backend is. The pointers on the host side are host
// memory, the others device memory.
using CopyFn = void (*)(BackendContext* c, void* dst, const void* src, int64_t bytes, CopyKind kind);
// The host waits for all work issued so far (optional: a synchronous backend
// runs every op to completion before it returns and leaves it null).
using SynchronizeFn = void (*)(BackendContext* c);

// --- Reductions whose results stay on the device -------------------------

// A piece of device memory in a reduction over many tensors, with the result
// slot it counts toward. `segs` arrays are host arrays.
struct SegmentRef {
  const float* data;  // device memory
  int64_t n;
  int64_t group;      // index into the output array
};
// out[g] = sum over segments s with s.group == g of sum_i s.data[i]^2,
// accumulated in double in a fixed order (deterministic); out[groups] is
// device memory, overwritten (groups with no segment are 0).
using SumSquaresFn = void (*)(BackendContext* c, double* out, const SegmentRef* segs, int64_t nsegs, int64_t groups);
// out[g] = number of non-finite values (inf, nan) in group g's segments.
using CountNonfiniteFn = void (*)(BackendContext* c, double* out, const SegmentRef* segs, int64_t nsegs, int64_t groups);
// acc[0] += sum of x[0, n), in double (the loss sum of a step, copied to the
// host once per step).
using AccumulateSumFn = void (*)(BackendContext* c, double* acc, const float* x, int64_t n);

// AdamW (PyTorch's torch.optim.AdamW arithmetic) over many flat tensors in
// one call, each with its own weight decay:
//   g = grad * grad_scale; p *= 1 - lr*wd; m = b1 m + (1-b1) g; v = b2 v + (1-b2) g^2;
//   p -= lr / (1 - b1^t) * m / (sqrt(v) / sqrt(1 - b2^t) + eps).
struct AdamWArgs {
  float lr, beta1, beta2, eps, grad_scale;
  int64_t step;  // 1-based
};
struct AdamWSegment {  // every pointer device memory
  float* param;
  const float* grad;
  float* m;
  float* v;
  int64_t n;
  float weight_decay;
  // Optional: the update also writes each updated parameter rounded to bf16
  // (nearest even) here: the bf16 compute copy of train.precision = "bf16",
  // made in the same pass instead of a cast after it.
  uint16_t* param_bf16 = nullptr;
};
// nonfinite == nullptr: apply the update to every segment. Otherwise a dry
// run: nothing is written; nonfinite[0] (device) = number of elements whose
// updated p, m or v would be non-finite.
using AdamWFn = void (*)(BackendContext* c, const AdamWSegment* segs, int64_t nsegs, const AdamWArgs& a, double* nonfinite);

// C[M,N] = A[M,K] B[K,N] with bf16 A and B, fp32 accumulation and C,
// row-major, M, N and K multiples of 16: the GPU backends' tile
// multiply-accumulate primitive (kernels/gpu/mma.h) over a whole product, its
// conformance check; the model's GEMMs go through the linear ops.
using TileGemmBf16Fn = void (*)(BackendContext* c, float* C, const uint16_t* A, const uint16_t* B, int64_t M, int64_t N, int64_t K);

// dst[0, n) = src[0, n) converted from src_t to dst_t (f32, f64, bf16;
// to bf16: round to nearest even).
using CastFn = void (*)(BackendContext* c, void* dst, DType dst_t, const void* src, DType src_t, int64_t n);

}  // namespace tera
