// Op tables per micro-batch per GPU. Backward of a linear Y[m,n] = X[m,k] W[k,n]
// is two GEMMs: dX = dY W^T (m, k, n) and dW = X^T dY (k, n, m), the latter
// (and the bias sum its kernel does) marked weight_grad: W in ZB-H1's split. Memory-bound
// byte counts read each input once and write each output once; backward of an
// elementwise op reads its saved input and the incoming gradient and writes
// one gradient. Causal flash attention skips the masked half of the scores;
// its backward does 2.5x the forward's matmul work (it recomputes the scores).
#include "plan/layer_ops.h"

namespace tera {

const char* op_class_name(OpClass c) {
  switch (c) {
    case OpClass::gemm: return "gemm";
    case OpClass::attention: return "attention";
    case OpClass::memory: return "memory";
  }
  return "?";
}

namespace {

// A GEMM reads A and B and writes C once (e bytes per element), which bounds
// skinny GEMMs (attention scores with k = head size) by HBM bandwidth.
Op gemm(const char* name, double m, double n, double k, double e, OpClass cls = OpClass::gemm, double batch = 1) {
  Op op{name, cls};
  op.m = m;
  op.n = n;
  op.k = k;
  op.batch = batch;
  op.flops = 2 * m * n * k * batch;
  op.bytes = e * (m * k + k * n + m * n) * batch;
  return op;
}

Op memory(const char* name, double bytes, OpClass cls = OpClass::memory) {
  Op op{name, cls};
  op.bytes = bytes;
  return op;
}

// Forward and backward GEMMs of a linear layer. With fp8 GEMMs the operands
// are 1 byte, and the inputs are cast first: X [m,k] and W [k,n] before the
// forward, dY [m,n] before the backward (amax read e, cast read e + write 1).
// Rowwise scales (torchao ROWWISE): a scale per row of each operand along
// its reduction axis, so the backward quantizes again what the forward cast
// along the other axis: dY for dX (rows) and for dW (columns), X for dW and
// W for dX; tensorwise casts dY once and reuses the forward's X and W.
void linear(PassOps& fwd, PassOps& bwd, const char* name, const char* dgrad, const char* wgrad, double m, double n,
            double k, double e, bool fp8 = false, bool rowwise = false) {
  const double g = fp8 ? 1 : e;
  fwd.ops.push_back(gemm(name, m, n, k, g));
  bwd.ops.push_back(gemm(dgrad, m, k, n, g));
  bwd.ops.push_back(gemm(wgrad, k, n, m, g));
  bwd.ops.back().weight_grad = true;
  if (fp8) {
    for (Op* op : {&fwd.ops.back(), &bwd.ops[bwd.ops.size() - 1], &bwd.ops[bwd.ops.size() - 2]}) {
      op->fp8 = true;
      op->fp8_rowwise = rowwise;
    }
    fwd.ops.push_back(memory("fp8_cast", (m * k + k * n) * (2 * e + 1)));
    const double again = rowwise ? 2 * m * n + m * k + k * n : m * n;  // elements cast in the backward
    bwd.ops.push_back(memory("fp8_cast_bwd", again * (2 * e + 1)));
  }
}

// The attention core: forward ops into *core (what selective recompute
// re-runs), backward ops into *b, fused (flash) or as Megatron's unfused
// kernels; context parallelism's K/V traffic on both.
void attention_core_ops(const ModelSpec& spec, const OpsOptions& o, PassOps* core_out, PassOps* b_out) {
  const ModelConfig& c = spec.config();
  const double B = static_cast<double>(o.B), T = static_cast<double>(o.T), tp = o.tp, e = static_cast<double>(o.act_bytes);
  const double Hl = static_cast<double>(c.heads) / tp, hs = static_cast<double>(c.head_size());
  // Context parallelism: the rank's T queries attend to all cp * T keys
  // (causal, load-balanced: half of the full product on average).
  const double Tk = T * o.cp, scores = B * Hl * T * Tk;
  PassOps &core = *core_out, &b = *b_out;
  if (o.flash_attention) {
    Op fa{"flash_attention", OpClass::attention};
    fa.flops = 0.5 * 4 * scores * hs;  // causal: half of QK^T and PV
    fa.fused_attention = true;
    core.ops.push_back(fa);
    Op fb = fa;
    fb.name = "flash_attention_bwd";
    fb.flops = 2.5 * fa.flops;
    b.ops.push_back(fb);
  } else {
    core.ops.push_back(gemm("attn_scores", T, Tk, hs, e, OpClass::attention, B * Hl));
    core.ops.push_back(memory("scale_mask_softmax", 2 * scores * e, OpClass::attention));
    if (o.dropout) core.ops.push_back(memory("attn_dropout", scores * (2 * e + 1), OpClass::attention));
    core.ops.push_back(gemm("attn_context", T, hs, Tk, e, OpClass::attention, B * Hl));
    b.ops.push_back(gemm("attn_context_dprobs", T, Tk, hs, e, OpClass::attention, B * Hl));
    b.ops.push_back(gemm("attn_context_dv", Tk, hs, T, e, OpClass::attention, B * Hl));
    if (o.dropout) b.ops.push_back(memory("attn_dropout_bwd", scores * (2 * e + 1), OpClass::attention));
    b.ops.push_back(memory("softmax_bwd", 3 * scores * e, OpClass::attention));
    b.ops.push_back(gemm("attn_scores_dq", T, hs, Tk, e, OpClass::attention, B * Hl));
    b.ops.push_back(gemm("attn_scores_dk", Tk, hs, T, e, OpClass::attention, B * Hl));
  }
  if (o.cp > 1) {
    // Ring attention (torchtitan's default rotation, an all-gather): forward
    // gathers every rank's K and V ([B, T, kv/tp, hs] each); backward gathers
    // them again and reduce-scatters their gradients.
    const double kv_bytes = 2 * B * Tk * (static_cast<double>(c.kv()) / tp) * hs * e;
    core.cp_comm.push_back({"cp_kv_all_gather", Collective::all_gather, kv_bytes});
    b.cp_comm.push_back({"cp_kv_all_gather", Collective::all_gather, kv_bytes});
    b.cp_comm.push_back({"cp_dkv_reduce_scatter", Collective::reduce_scatter, kv_bytes});
  }
}

// Tensor-parallel collectives (Megatron's conjugate pairs; with sequence
// parallelism each all-reduce becomes a reduce-scatter + all-gather), `act`
// bytes each, in both passes.
void tp_collectives(const OpsOptions& o, double act, PassOps* f, PassOps* b) {
  if (o.tp > 1) {
    for (PassOps* pass : {f, b}) {
      if (o.sequence_parallel) {
        pass->comm.push_back({"sp_all_gather", Collective::all_gather, act});
        pass->comm.push_back({"sp_all_gather", Collective::all_gather, act});
        pass->comm.push_back({"sp_reduce_scatter", Collective::reduce_scatter, act});
        pass->comm.push_back({"sp_reduce_scatter", Collective::reduce_scatter, act});
      } else {
        pass->comm.push_back({"tp_all_reduce", Collective::all_reduce, act});
        pass->comm.push_back({"tp_all_reduce", Collective::all_reduce, act});
      }
    }
  }
}

}  // namespace

PartOps block_ops(const ModelSpec& spec, const OpsOptions& o) {
  const ModelConfig& c = spec.config();
  const double B = static_cast<double>(o.B), T = static_cast<double>(o.T), tp = o.tp, e = static_cast<double>(o.act_bytes);
  const double N = B * T, Ns = o.sequence_parallel ? N / tp : N, C = static_cast<double>(c.hidden);
  const double Ql = static_cast<double>(spec.qkv_width_local(o.tp)), Fl = static_cast<double>(c.ffn()) / tp;
  const double fc_n = (c.mlp_matrices() - 1) * Fl;  // up (and gate) projections, fused
  const double d = o.dropout ? 1 : 0;
  const double act = N * C * e;  // a full-sequence activation, the TP collective buffer
  PartOps p;
  PassOps &f = p.fwd, &b = p.bwd;
  // Attention block.
  f.ops.push_back(memory("layernorm_1", 2 * Ns * C * e));
  b.ops.push_back(memory("layernorm_1_bwd", 4 * Ns * C * e));
  const bool f8 = o.fp8_gemms, rw = o.fp8_rowwise;
  linear(f, b, "qkv", "qkv_dgrad", "qkv_wgrad", N, Ql, C, e, f8, rw);
  // The attention core forward (what selective recompute re-runs) and its backward.
  PassOps core;
  attention_core_ops(spec, o, &core, &b);
  f.ops.insert(f.ops.end(), core.ops.begin(), core.ops.end());
  f.cp_comm.insert(f.cp_comm.end(), core.cp_comm.begin(), core.cp_comm.end());
  linear(f, b, "attn_proj", "attn_proj_dgrad", "attn_proj_wgrad", N, C, C / tp, e, f8, rw);
  f.ops.push_back(memory("bias_dropout_add_1", Ns * C * (3 * e + d)));
  b.ops.push_back(memory("bias_dropout_add_1_bwd", Ns * C * (2 * e + d)));
  // MLP block.
  f.ops.push_back(memory("layernorm_2", 2 * Ns * C * e));
  b.ops.push_back(memory("layernorm_2_bwd", 4 * Ns * C * e));
  linear(f, b, "fc", "fc_dgrad", "fc_wgrad", N, fc_n, C, e, f8, rw);
  const bool gated = c.mlp == MlpKind::gated;
  f.ops.push_back(memory(gated ? "swiglu" : "bias_gelu", (gated ? 3 : 2) * N * Fl * e));
  b.ops.push_back(memory(gated ? "swiglu_bwd" : "bias_gelu_bwd", (gated ? 5 : 3) * N * Fl * e));
  linear(f, b, "fc2", "fc2_dgrad", "fc2_wgrad", N, C, Fl, e, f8, rw);
  f.ops.push_back(memory("bias_dropout_add_2", Ns * C * (3 * e + d)));
  b.ops.push_back(memory("bias_dropout_add_2_bwd", Ns * C * (2 * e + d)));
  tp_collectives(o, act, &f, &b);
  if (o.recompute == Recompute::full) p.recompute = f;
  if (o.recompute == Recompute::selective && o.op_level_sac) {
    // PyTorch's op-level SAC: the attention kernel and every other matmul
    // saved (alternating over the whole model, so each linear layer's GEMM
    // re-runs in half the blocks: half its work on average); every other
    // forward op re-runs.
    for (const Op& op : f.ops) {
      if (op.cls == OpClass::attention) continue;
      Op again = op;
      if (op.cls == OpClass::gemm) {
        again.flops *= 0.5;
        again.bytes *= 0.5;
      }
      p.recompute.ops.push_back(again);
    }
  } else if (o.recompute == Recompute::selective && !o.flash_attention) {
    p.recompute = core;
  }
  p.recompute.cp_comm.clear();  // the backward's own K/V gather serves the recomputed attention too
  return p;
}

PartOps embedding_ops(const ModelSpec& spec, const OpsOptions& o) {
  const double N = static_cast<double>(o.B * o.T), C = static_cast<double>(spec.config().hidden);
  const double e = static_cast<double>(o.act_bytes), act = N * C * e;
  PartOps p;
  // Token rows + positions, summed (and dropped out) into the residual stream.
  p.fwd.ops.push_back(memory("embedding", N * C * (3 * e + (o.dropout ? 1 : 0))));
  p.bwd.ops.push_back(memory("embedding_bwd", 3 * N * C * e));
  p.bwd.ops.back().weight_grad = true;  // the table's rows: the embedding has no input gradient
  if (o.tp > 1) {  // vocab-parallel embedding: partial sums combined across tp
    if (o.sequence_parallel) {
      p.fwd.comm.push_back({"embedding_reduce_scatter", Collective::reduce_scatter, act});
      p.bwd.comm.push_back({"embedding_all_gather", Collective::all_gather, act});
    } else {
      p.fwd.comm.push_back({"embedding_all_reduce", Collective::all_reduce, act});
    }
  }
  return p;  // Megatron recomputes transformer blocks only
}

PartOps head_ops(const ModelSpec& spec, const OpsOptions& o) {
  const double N = static_cast<double>(o.B * o.T), C = static_cast<double>(spec.config().hidden);
  const double tp = o.tp, Ns = o.sequence_parallel ? N / tp : N, e = static_cast<double>(o.act_bytes);
  const double Vl = static_cast<double>(spec.padded_vocab()) / tp, act = N * C * e;
  PartOps p;
  p.fwd.ops.push_back(memory("final_layernorm", 2 * Ns * C * e));
  p.bwd.ops.push_back(memory("final_layernorm_bwd", 4 * Ns * C * e));
  linear(p.fwd, p.bwd, "logits", "logits_dgrad", "logits_wgrad", N, Vl, C, e);
  // Vocab-parallel cross-entropy: logits read, fp32 softmax written; backward
  // reads it and writes the logit gradients.
  p.fwd.ops.push_back(memory("cross_entropy", N * Vl * (e + 4)));
  p.bwd.ops.push_back(memory("cross_entropy_bwd", N * Vl * (4 + e)));
  if (o.tp > 1) {
    // max, sum-exp and target-logit all-reduces over [N] floats
    for (int i = 0; i < 3; ++i) p.fwd.comm.push_back({"vocab_ce_all_reduce", Collective::all_reduce, N * 4});
    if (o.sequence_parallel) {
      p.fwd.comm.push_back({"head_all_gather", Collective::all_gather, act});
      p.bwd.comm.push_back({"head_reduce_scatter", Collective::reduce_scatter, act});
    } else {
      p.bwd.comm.push_back({"head_all_reduce", Collective::all_reduce, act});
    }
  }
  return p;
}

SplitBackward split_backward(const PassOps& bwd) {
  SplitBackward s;
  for (const Op& op : bwd.ops) (op.weight_grad ? s.weight : s.input).ops.push_back(op);
  s.input.comm = bwd.comm;
  s.input.cp_comm = bwd.cp_comm;
  return s;
}

double pass_flops(const PassOps& p) {
  double f = 0;
  for (const Op& op : p.ops) f += op.flops;
  return f;
}

}  // namespace tera
