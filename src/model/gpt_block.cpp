// One transformer block's forward and backward on one tensor-parallel rank:
// the equations of model/gpt.h as one straight sequence of calls, with the
// variant (norm, attention, MLP, dtype of each kept tensor) the block plan
// chose once. Under bf16 GEMMs a tensor kept in bf16 that a kernel writes in
// fp32 (a linear layer's output) is staged in a workspace buffer and rounded
// as it is kept (fp32_output, keep).
#include "model/gpt_layers.h"

namespace tera {

void GptLayers::block_forward(const BlockActs& a, const BlockWeights& w, const float* x, int64_t B, int64_t T) {
  const int64_t C = d_.C, N = B * T, Nt = rows(N);
  // Attention: column-parallel QKV over local heads (rotated on a Llama
  // block), row-parallel output projection.
  norm_forward(a.ln1, a.ln1_mean.f32(), a.ln1_rstd.f32(), x, w.ln1_g, w.ln1_b, Nt);
  float* qkv = fp32_output(a.qkv, ws_.dwide);
  linear_fwd(qkv, norm_output(a.ln1, N), w.qkv_w, w.bf16(w.qkv_w), w.qkv_b, N, C, d_.Ql, ws_.cast);
  if (plan_.rotary) be_.rope_forward(qkv, N, T, d_.Hl, d_.KVl, d_.hs, rope_, rope_positions());
  keep(a.qkv, qkv, N * d_.Ql);
  attention_forward(a, B, T);
  linear_fwd(partial_sum_buffer(a.res1.f32()), a.atty, w.proj_w, w.bf16(w.proj_w), nullptr, N, d_.Cl, C, ws_.cast);
  reduce_partial_sum(a.res1.f32(), N);
  be_.bias_residual(a.res1.f32(), a.res1.f32(), w.proj_b, x, Nt, C);
  // MLP: column-parallel FC (and gate), row-parallel projection.
  norm_forward(a.ln2, a.ln2_mean.f32(), a.ln2_rstd.f32(), a.res1.f32(), w.ln2_g, w.ln2_b, Nt);
  mlp_forward(a, w, norm_output(a.ln2, N), N);
  linear_fwd(partial_sum_buffer(a.out.f32()), mlp_activation(a), w.fcp_w, w.bf16(w.fcp_w), nullptr, N, d_.Fl, C,
             ws_.cast);
  reduce_partial_sum(a.out.f32(), N);
  be_.bias_residual(a.out.f32(), a.out.f32(), w.fcp_b, a.res1.f32(), Nt, C);
}

void GptLayers::block_backward(const BlockActs& a, const BlockWeights& w, const BlockWeights& g, const float* x,
                               float* dres, int64_t B, int64_t T) {
  const int64_t C = d_.C, N = B * T, Nt = rows(N);
  const bool split = plan_.split_backward;  // B only: g is unread, the weight gradients wait for W
  // MLP: out = res1 + reduce(act @ Wfp^T) + b; dres = d(out) = d(res1) through the skip.
  mlp_backward(a, w, g, full_tokens(dres, N), N);
  const NormGrads d2 = norm_grads(g.ln2_g, g.ln2_b, a.dw_ln2_g, a.dw_ln2_b);
  norm_backward(dres, d2.g, d2.b, reduce_input_grad(N), a.res1.f32(), w.ln2_g, a.ln2_mean.f32(), a.ln2_rstd.f32(),
                Nt);
  // Attention: res1 = x + reduce(atty @ Wo^T) + b; dres now holds d(res1) = d(x) through the skip.
  const float* dproj = full_tokens(dres, N);
  if (split) {
    keep_dy(a.dw_proj, dproj, N * C);
    linear_bwd(ws_.dnarrow, nullptr, nullptr, dproj, {}, w.proj_w, w.bf16(w.proj_w), N, d_.Cl, C, false, ws_.cast);
  } else {
    linear_bwd(ws_.dnarrow, g.proj_w, g.proj_b, dproj, a.atty, w.proj_w, w.bf16(w.proj_w), N, d_.Cl, C, false,
               ws_.cast);
  }
  attention_backward(a, B, T);
  // The rotary embedding is a rotation: its backward rotates d(q), d(k) back.
  if (plan_.rotary) be_.rope_backward(ws_.dwide, N, T, d_.Hl, d_.KVl, d_.hs, rope_, rope_positions());
  if (split) {
    keep_dy(a.dw_qkv, ws_.dwide, N * d_.Ql);
    linear_bwd(ws_.dnarrow, nullptr, nullptr, ws_.dwide, {}, w.qkv_w, w.bf16(w.qkv_w), N, C, d_.Ql, false, ws_.cast);
  } else {
    linear_bwd(ws_.dnarrow, g.qkv_w, g.qkv_b, ws_.dwide, norm_output(a.ln1, N), w.qkv_w, w.bf16(w.qkv_w), N, C,
               d_.Ql, false, ws_.cast);
  }
  const NormGrads d1 = norm_grads(g.ln1_g, g.ln1_b, a.dw_ln1_g, a.dw_ln1_b);
  norm_backward(dres, d1.g, d1.b, reduce_input_grad(N), x, w.ln1_g, a.ln1_mean.f32(), a.ln1_rstd.f32(), Nt);
}

// W of the split backward: every parameter gradient block_backward left out,
// from the output gradients it kept and the block's saved inputs (its
// weights are not read). The norm outputs are gathered again under sp, as
// the unsplit backward gathers them.
void GptLayers::block_weight_grads(const BlockActs& a, const BlockWeights& g, int64_t B, int64_t T) {
  TERA_ASSERT(plan_.split_backward, "weight gradients apart from the backward without the split backward");
  const int64_t C = d_.C, N = B * T, Fl = d_.Fl;
  linear_bwd(nullptr, g.fcp_w, g.fcp_b, a.dw_fcp.f32(), mlp_activation(a), nullptr, nullptr, N, Fl, C, false,
             ws_.cast);
  const ConstTypedView ln2 = norm_output(a.ln2, N);
  linear_bwd(nullptr, g.fc_w, g.fc_b, a.dw_fc.f32(), ln2, nullptr, nullptr, N, C, Fl, false, ws_.cast);
  if (plan_.mlp == MlpPath::swiglu) {
    linear_bwd(nullptr, g.gate_w, g.gate_b, a.dw_gate.f32(), ln2, nullptr, nullptr, N, C, Fl, false, ws_.cast);
  }
  add_kept(g.ln2_g, g.ln2_b, a.dw_ln2_g, a.dw_ln2_b);
  linear_bwd(nullptr, g.proj_w, g.proj_b, a.dw_proj.f32(), a.atty, nullptr, nullptr, N, d_.Cl, C, false, ws_.cast);
  linear_bwd(nullptr, g.qkv_w, g.qkv_b, a.dw_qkv.f32(), norm_output(a.ln1, N), nullptr, nullptr, N, C, d_.Ql, false,
             ws_.cast);
  add_kept(g.ln1_g, g.ln1_b, a.dw_ln1_g, a.dw_ln1_b);
}

GptLayers::NormGrads GptLayers::norm_grads(float* dg, float* db, const TypedView& kept_g, const TypedView& kept_b) {
  if (!plan_.split_backward) return {dg, db};
  be_.fill(kept_g.f32(), DType::f32, 0.0, d_.C);  // the norm's backward adds
  if (!kept_b.empty()) be_.fill(kept_b.f32(), DType::f32, 0.0, d_.C);
  return {kept_g.f32(), kept_b.f32()};
}

void GptLayers::add_kept(float* dg, float* db, const TypedView& kept_g, const TypedView& kept_b) {
  be_.residual_forward(dg, dg, kept_g.f32(), d_.C);
  if (db != nullptr) be_.residual_forward(db, db, kept_b.f32(), d_.C);
}

void GptLayers::keep_dy(const TypedView& kept, const float* dy, int64_t n) {
  be_.copy(kept.f32(), dy, n * static_cast<int64_t>(sizeof(float)), CopyKind::device_to_device);
}

// atty [N, Cl] from qkv over the local heads; keeps probs (naive) or lse (flash).
void GptLayers::attention_forward(const BlockActs& a, int64_t B, int64_t T) {
  const int64_t Hl = d_.Hl, KVl = d_.KVl, hs = d_.hs;
  switch (plan_.attention) {
    case AttentionPath::naive:
      be_.attention_forward(a.atty.f32(), a.probs.f32(), a.qkv.f32(), B, T, Hl, KVl, hs);
      break;
    case AttentionPath::flash_f32:
      be_.flash_attention_forward(a.atty.f32(), a.lse.f32(), a.qkv.f32(), B, T, Hl, KVl, hs);
      break;
    case AttentionPath::flash_bf16: {
      float* atty = ws_.dnarrow;  // [N, Cl] fp32, then kept in bf16
      be_.flash_attention_forward_bf16(atty, a.lse.f32(), a.qkv.bf16(), B, T, Hl, KVl, hs);
      keep(a.atty, atty, B * T * d_.Cl);
      break;
    }
    case AttentionPath::ring_f32:
      ring_->forward(a.atty.f32(), a.lse.f32(), a.qkv.f32(), B, T);
      break;
    case AttentionPath::ring_bf16: {
      // The ring's kernels are fp32: the kept (rounded) qkv widened into
      // dwide, free again after keep; atty staged in fp32 as flash_bf16's.
      const int64_t N = B * T;
      be_.cast(ws_.dwide, DType::f32, a.qkv.bf16(), DType::bf16, N * d_.Ql);
      ring_->forward(ws_.dnarrow, a.lse.f32(), ws_.dwide, B, T);
      keep(a.atty, ws_.dnarrow, N * d_.Cl);
      break;
    }
  }
}

// d(atty) in ws.dnarrow -> d(qkv) in ws.dwide.
void GptLayers::attention_backward(const BlockActs& a, int64_t B, int64_t T) {
  const int64_t Hl = d_.Hl, KVl = d_.KVl, hs = d_.hs;
  switch (plan_.attention) {
    case AttentionPath::naive:
      be_.attention_backward(ws_.dwide, ws_.dnarrow, a.qkv.f32(), a.probs.f32(), B, T, Hl, KVl, hs);
      break;
    case AttentionPath::flash_f32:
      be_.flash_attention_backward(ws_.dwide, ws_.dnarrow, a.qkv.f32(), a.atty.f32(), a.lse.f32(), B, T, Hl, KVl, hs);
      break;
    case AttentionPath::flash_bf16:
      be_.flash_attention_backward_bf16(ws_.dwide, ws_.dnarrow, a.qkv.bf16(), a.atty.bf16(), a.lse.f32(), B, T, Hl,
                                        KVl, hs);
      break;
    case AttentionPath::ring_f32:
      ring_->backward(ws_.dwide, ws_.dnarrow, a.qkv.f32(), a.atty.f32(), a.lse.f32(), B, T);
      break;
    case AttentionPath::ring_bf16: {
      const int64_t N = B * T;
      be_.cast(ws_.ring_qkv_f32, DType::f32, a.qkv.bf16(), DType::bf16, N * d_.Ql);
      be_.cast(ws_.ring_out_f32, DType::f32, a.atty.bf16(), DType::bf16, N * d_.Cl);
      ring_->backward(ws_.dwide, ws_.dnarrow, ws_.ring_qkv_f32, ws_.ring_out_f32, a.lse.f32(), B, T);
      break;
    }
  }
}

// fch (and the gate) from ln2 [N, C], then the activation. Under bf16 GEMMs
// fch and the gate are rounded to bf16 as they are kept, and the activation
// reads and writes bf16 (fp32 inside).
void GptLayers::mlp_forward(const BlockActs& a, const BlockWeights& w, ConstTypedView ln2, int64_t N) {
  const int64_t C = d_.C, Fl = d_.Fl;
  if (plan_.mlp == MlpPath::gelu_fused) {
    // One op: fch and its GELU in bf16 (a GEMM epilogue on cuda), no fp32 fch.
    be_.linear_gelu_forward_bf16(a.fch_gelu.bf16(), a.fch.bf16(), bf16_input(ln2, N, C, ws_.cast.x), w.bf16(w.fc_w),
                                 w.fc_b, N, C, Fl, ws_.dwide);
    return;
  }
  float* fch = fp32_output(a.fch, ws_.dwide);
  linear_fwd(fch, ln2, w.fc_w, w.bf16(w.fc_w), w.fc_b, N, C, Fl, ws_.cast);
  keep(a.fch, fch, N * Fl);
  if (plan_.mlp == MlpPath::gelu) {
    if (plan_.mlp_act == DType::bf16) {
      be_.gelu_forward_bf16(a.fch_gelu.bf16(), a.fch.bf16(), N * Fl);
    } else {
      be_.gelu_forward(a.fch_gelu.f32(), a.fch.f32(), N * Fl);
    }
    return;
  }
  float* gate = fp32_output(a.fch_gate, ws_.dgate);
  linear_fwd(gate, ln2, w.gate_w, w.bf16(w.gate_w), w.gate_b, N, C, Fl, ws_.cast);
  keep(a.fch_gate, gate, N * Fl);
  if (plan_.mlp_act == DType::bf16) {
    be_.swiglu_forward_bf16(a.fch_swiglu.bf16(), a.fch_gate.bf16(), a.fch.bf16(), N * Fl);
  } else {
    be_.swiglu_forward(a.fch_swiglu.f32(), a.fch_gate.f32(), a.fch.f32(), N * Fl);
  }
}

void GptLayers::mlp_backward(const BlockActs& a, const BlockWeights& w, const BlockWeights& g, const float* dout,
                             int64_t N) {
  const int64_t C = d_.C, Fl = d_.Fl;
  const bool split = plan_.split_backward;  // dx only; each dy kept for block_weight_grads
  float* dwide = ws_.dwide;  // [N, Fl] d(act), then d(fch)
  // The down projection: d(act) = d(out) @ Wfp; the fused form goes on to
  // d(fch) = d(act) * gelu'(fch) in the same op (a GEMM epilogue on cuda).
  if (split) keep_dy(a.dw_fcp, dout, N * C);
  float* dfcp_w = split ? nullptr : g.fcp_w;
  float* dfcp_b = split ? nullptr : g.fcp_b;
  if (plan_.mlp == MlpPath::gelu_fused) {
    be_.linear_backward_gelu_bf16(dwide, dfcp_w, dfcp_b, dout, a.fch_gelu.bf16(), w.bf16(w.fcp_w), a.fch.bf16(), N,
                                  Fl, C, ws_.cast.dy);
  } else {
    linear_bwd(dwide, dfcp_w, dfcp_b, dout, split ? ConstTypedView() : ConstTypedView(mlp_activation(a)), w.fcp_w,
               w.bf16(w.fcp_w), N, Fl, C, false, ws_.cast);
  }
  switch (plan_.mlp) {
    case MlpPath::gelu_fused: break;  // dwide holds d(fch) already
    case MlpPath::gelu:
      if (plan_.mlp_act == DType::bf16) {
        be_.gelu_backward_bf16(dwide, a.fch.bf16(), dwide, N * Fl);
      } else {
        be_.gelu_backward(dwide, a.fch.f32(), dwide, N * Fl);
      }
      break;
    case MlpPath::swiglu:
      // act = silu(gate) * up: d(up) over d(act) in place, d(gate) beside it.
      if (plan_.mlp_act == DType::bf16) {
        be_.swiglu_backward_bf16(ws_.dgate, dwide, a.fch_gate.bf16(), a.fch.bf16(), dwide, N * Fl);
      } else {
        be_.swiglu_backward(ws_.dgate, dwide, a.fch_gate.f32(), a.fch.f32(), dwide, N * Fl);
      }
      break;
  }
  // d(ln2) from the up projection (and the gate's, accumulated).
  const bool gated = plan_.mlp == MlpPath::swiglu;
  if (split) {
    keep_dy(a.dw_fc, dwide, N * Fl);
    if (gated) keep_dy(a.dw_gate, ws_.dgate, N * Fl);
    linear_bwd(ws_.dnarrow, nullptr, nullptr, dwide, {}, w.fc_w, w.bf16(w.fc_w), N, C, Fl, false, ws_.cast);
    if (gated) {
      linear_bwd(ws_.dnarrow, nullptr, nullptr, ws_.dgate, {}, w.gate_w, w.bf16(w.gate_w), N, C, Fl, true, ws_.cast);
    }
    return;
  }
  const ConstTypedView ln2 = norm_output(a.ln2, N);
  linear_bwd(ws_.dnarrow, g.fc_w, g.fc_b, dwide, ln2, w.fc_w, w.bf16(w.fc_w), N, C, Fl, false, ws_.cast);
  if (gated) {
    linear_bwd(ws_.dnarrow, g.gate_w, g.gate_b, ws_.dgate, ln2, w.gate_w, w.bf16(w.gate_w), N, C, Fl, true, ws_.cast);
  }
}

}  // namespace tera
