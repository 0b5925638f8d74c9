// The cost model (see cost_model.h). Optimizer traffic per local parameter:
// bf16 reads fp32 master (tera: the fp32 parameter), m, v and grad and writes
// master, m, v and the 16-bit weight copy (30 bytes); fp32 reads p, g, m, v and writes p, m, v
// (28 bytes). Point-to-point messages carry 1/tp of an activation (Megatron's
// scatter/gather optimization, or the sequence-parallel shard), re-gathered
// inside the node when sequence parallelism is off.
#include "plan/cost_model.h"

#include <algorithm>

#include "plan/collectives.h"
#include "plan/memory_model.h"

namespace tera {

PassCost& PassCost::operator+=(const PassCost& o) {
  gemm += o.gemm;
  attention += o.attention;
  memory += o.memory;
  tp_comm += o.tp_comm;
  dp_comm += o.dp_comm;
  rc_gemm += o.rc_gemm;
  rc_attention += o.rc_attention;
  rc_memory += o.rc_memory;
  return *this;
}

PassCost PassCost::scaled(double f) const {
  return {gemm * f,    attention * f,    memory * f,    tp_comm * f, dp_comm * f,
          rc_gemm * f, rc_attention * f, rc_memory * f};
}

double gemm_efficiency(const Op& op, const GpuSpec& gpu, const Efficiency& e) {
  auto f = [&](double d) { return d / (d + e.gemm_half_dim); };
  const double mn = gpu.sms > 0 ? wave_efficiency(op.m, op.n, op.batch, gpu.sms, e.gemm_tile_m, e.gemm_tile_n)
                                : f(op.m) * f(op.n);
  return e.gemm_max * e.tensor_clock * mn * f(op.k);
}

double op_time(const Op& op, const Cluster& cl, double peak) {
  double t = cl.eff.kernel_overhead;
  if (op.fused_attention) t += op.flops / (peak * cl.eff.flash * cl.eff.tensor_clock);
  else if (op.m > 0 && op.cls == OpClass::attention && cl.eff.attention > 0)
    t += std::max(op.flops / (peak * cl.eff.attention), op.bytes / (cl.gpu.hbm_bw * cl.eff.hbm));
  else if (op.m > 0) {
    const double rate = peak * gemm_efficiency(op, cl.gpu, cl.eff) * (op.fp8 ? cl.eff.fp8 : 1.0) *
                        (op.fp8_rowwise ? cl.eff.fp8_rowwise : 1.0);
    t += std::max(op.flops / rate, op.bytes / (cl.gpu.hbm_bw * cl.eff.hbm));
  }
  else if (op.cls == OpClass::attention && cl.eff.softmax > 0) t += op.bytes / (cl.gpu.hbm_bw * cl.eff.softmax);
  else t += op.bytes / (cl.gpu.hbm_bw * cl.eff.hbm);
  return t;
}

PassCost price_pass(const PassOps& p, const Cluster& cl, double peak, int tp, double gemm_peak, int cp) {
  PassCost c;
  if (gemm_peak <= 0) gemm_peak = peak;
  for (const Op& op : p.ops) {
    const double t = op_time(op, cl, op.cls == OpClass::gemm ? gemm_peak : peak);
    if (op.cls == OpClass::gemm) c.gemm += t;
    else if (op.cls == OpClass::attention) c.attention += t;
    else c.memory += t;
  }
  double comm = 0;
  for (const CommOp& x : p.comm) comm += collective_time(x.kind, x.bytes, Group{tp, 1}, cl);
  c.tp_comm = cl.stack.tp_comm_overlap ? overlapped(c.gemm, comm, cl.eff) - c.gemm : comm;
  // Context parallelism: K/V blocks travel round the cp group (stride tp)
  // while the attention of the blocks already here runs: only what exceeds
  // the attention is exposed, plus overlap_loss of the rest.
  double kv = 0;
  for (const CommOp& x : p.cp_comm) kv += collective_time(x.kind, x.bytes, Group{cp, tp}, cl);
  if (kv > 0) c.tp_comm += overlapped(c.attention, kv, cl.eff) - c.attention;
  return c;
}

Expected<double> peak_flops(const Cluster& cl, Precision p) {
  if (p == Precision::fp32) return cl.gpu.peak_flops_32;
  if (cl.gpu.peak_flops_16 <= 0) {
    return Status::error("cluster " + cl.name + " (" + cl.source +
                         ") has no 16-bit peak (gpu.peak_tflops_16); plan with --precision fp32");
  }
  return cl.gpu.peak_flops_16;
}

Expected<double> gemm_peak_flops(const Cluster& cl, const Workload& w) {
  if (!w.fp8_gemms) return peak_flops(cl, w.precision);
  if (cl.gpu.peak_flops_8 <= 0) {
    return Status::error("cluster " + cl.name + " (" + cl.source + ") has no fp8 peak (gpu.peak_tflops_8)");
  }
  return cl.gpu.peak_flops_8;
}

namespace {

// The pass a ZeRO-2/3 collective serves: a forward gathers the parameters
// (ZeRO-3); a whole backward gathers them and reduce-scatters the gradients;
// split (zb-h1), B gathers (its dX GEMMs read the weights) and W reduce-scatters.
enum class ZeroPass { forward, backward, input_grad, weight_grad };

// FSDP without reshard_after_forward under pipeline parallelism (PyTorch's
// pipelining schedules): the stage's parameters are gathered once per step
// and its gradients reduce-scattered once, after the last micro-batch, as
// ZeRO-1's are (price_stage_updates); no per-micro-batch traffic.
bool fsdp_once_per_step(const ParallelLayout& l) {
  return l.zero >= 3 && !l.reshard_after_forward && l.pp > 1 && l.dp_cp() > 1;
}

// The ranks ZeRO's collectives run over: the shard group (all dp x cp ranks
// holding the same parameters, or a hybrid layout's group of `shard` of them,
// consecutive at stride tp), and the replicas of a hybrid layout's shards.
Group zero_shard_group(const ParallelLayout& l) { return Group{l.zero_group(), l.tp}; }
Group zero_replica_group(const ParallelLayout& l) { return Group{l.zero_replicas(), l.tp * l.zero_group()}; }

// Hybrid sharding: the all-reduce of a reduce-scattered gradient shard of
// `params` local parameters (params / shard of them) across the replicas.
double replica_all_reduce(const ParallelLayout& l, double params, double bytes_per_param, const Cluster& cl) {
  if (!l.hybrid_shard()) return 0;
  return collective_time(Collective::all_reduce, params / l.zero_group() * bytes_per_param, zero_replica_group(l), cl);
}

// ZeRO-2/3 traffic of one pass over `params` local parameters, overlapped
// with the pass's own work: only what exceeds it is exposed. Without
// reshard_after_forward a block's parameters gathered for its forward serve
// its backward too: the backward gathers nothing.
double zero_exposed(const ParallelLayout& l, const PrecisionBytes& pb, const Cluster& cl, double params, ZeroPass pass,
                    double pass_time, int tensors) {
  if (l.dp_cp() <= 1 || l.zero < 2 || fsdp_once_per_step(l)) return 0;
  const Group dp = zero_shard_group(l);
  // A stack that gathers tensor by tensor pays one latency per tensor.
  const double extra = cl.stack.zero_per_tensor ? tensors - 1 : 0;
  const bool backward = pass == ZeroPass::backward || pass == ZeroPass::weight_grad;
  double t = 0;
  const bool gathers = pass == ZeroPass::forward || (l.reshard_after_forward && pass != ZeroPass::weight_grad);
  if (l.zero >= 3 && gathers) {
    t += collective_time(Collective::all_gather, params * static_cast<double>(pb.param), dp, cl) +
         extra * collective_time(Collective::all_gather, 0, dp, cl);
  }
  if (backward) {
    const double gb = static_cast<double>(grad_bytes(pb, l.zero));
    t += collective_time(Collective::reduce_scatter, params * gb, dp, cl) +
         extra * collective_time(Collective::reduce_scatter, 0, dp, cl) + replica_all_reduce(l, params, gb, cl);
  }
  return overlapped(pass_time, t, cl.eff) - pass_time;
}

}  // namespace

PartCosts price_parts(const ModelSpec& spec, const ParallelLayout& l, const Workload& w, const Cluster& cl) {
  const PrecisionBytes pb = precision_bytes(w.precision, cl.stack);
  PartCosts pc;
  pc.peak_flops = peak_flops(cl, w.precision).value();
  OpsOptions o;
  o.B = l.micro_batch;
  o.T = spec.config().seq_len / l.cp;  // this rank's share of each sequence
  o.cp = l.cp;
  o.tp = l.tp;
  o.sequence_parallel = l.sequence_parallel && l.tp > 1;
  o.recompute = l.recompute;
  o.flash_attention = cl.stack.flash_attention;
  o.dropout = cl.stack.dropout;
  o.act_bytes = dtype_bytes(pb.act);
  o.fp8_gemms = w.fp8_gemms;
  o.fp8_rowwise = w.fp8_gemms && w.fp8_rowwise;
  o.op_level_sac = cl.stack.op_level_sac;
  const double gp = gemm_peak_flops(cl, w).value();
  // F, the whole backward, and the backward split into B and W; the
  // recomputed forward runs before the backward needs it, so with B.
  auto both = [&](const PartOps& ops, PassCost* f, PassCost* b, PassCost* bi, PassCost* bw) {
    *f = price_pass(ops.fwd, cl, pc.peak_flops, l.tp, gp, l.cp);
    *b = price_pass(ops.bwd, cl, pc.peak_flops, l.tp, gp, l.cp);
    PassCost rc = price_pass(ops.recompute, cl, pc.peak_flops, l.tp, gp, l.cp);
    rc.rc_gemm = rc.gemm, rc.rc_attention = rc.attention, rc.rc_memory = rc.memory;  // the re-run forward, by class
    *b += rc;
    const SplitBackward split = split_backward(ops.bwd);
    *bi = price_pass(split.input, cl, pc.peak_flops, l.tp, gp, l.cp);
    *bi += rc;
    *bw = price_pass(split.weight, cl, pc.peak_flops, l.tp, gp, l.cp);
  };
  both(block_ops(spec, o), &pc.block_f, &pc.block_b, &pc.block_bi, &pc.block_bw);
  both(embedding_ops(spec, o), &pc.emb_f, &pc.emb_b, &pc.emb_bi, &pc.emb_bw);
  both(head_ops(spec, o), &pc.head_f, &pc.head_b, &pc.head_bi, &pc.head_bw);
  pc.act_bytes = static_cast<double>(o.B * o.T * spec.config().hidden * o.act_bytes);
  pc.block_tensors = static_cast<int>(std::count_if(spec.params().begin(), spec.params().end(),
                                                    [](const ParamInfo& p) { return p.layer == 0; }));
  return pc;
}

StepCosts price_step(const ModelSpec& spec, const ParallelLayout& l, const Workload& w, const Cluster& cl) {
  ParamSplit split = param_split(spec, l.tp);
  split.untied = w.untied_embeddings;
  return price_step(price_parts(spec, l, w, cl), split, spec.config().layers, l, w, cl);
}

namespace {

// Forward and backward of each virtual stage: its blocks, the embedding on
// the first and the head on the last, each with the ZeRO-2/3 traffic it
// serves overlapped.
void price_virtual_stages(const PartCosts& parts, const ParamSplit& split, int64_t layers, const ParallelLayout& l,
                          const PrecisionBytes& pb, const Cluster& cl, StepCosts* out) {
  StepCosts& sc = *out;
  const double block_p = split.block, emb_p = split.wte;
  // ZeRO-2/3 traffic overlapped with the pass it serves.
  auto with_zero = [&](PassCost c, double params, ZeroPass pass, int tensors) {
    c.dp_comm = zero_exposed(l, pb, cl, params, pass, c.total(), tensors);
    return c;
  };
  const int bt = parts.block_tensors;
  const ZeroPass F = ZeroPass::forward, B = ZeroPass::backward;
  const PassCost bf = with_zero(parts.block_f, block_p, F, bt), bb = with_zero(parts.block_b, block_p, B, bt);
  const PassCost ef = with_zero(parts.emb_f, emb_p, F, 1), eb = with_zero(parts.emb_b, emb_p, B, 1);
  const PassCost hf = with_zero(parts.head_f, emb_p, F, 1), hb = with_zero(parts.head_b, emb_p, B, 1);
  const int V = l.pp * l.vpp;
  // Stage v's pass from a block's, the embedding's (v = 0) and the head's (v = V - 1).
  auto stage_pass = [&](int v, const PassCost& block, const PassCost& emb, const PassCost& head) {
    PassCost c = block.scaled(static_cast<double>(layers_in_virtual_stage(l, layers, v)));
    if (v == 0) c += emb;
    if (v == V - 1) c += head;
    return c;
  };
  sc.fwd.resize(static_cast<size_t>(V));
  sc.bwd.resize(static_cast<size_t>(V));
  for (int v = 0; v < V; ++v) {
    sc.fwd[static_cast<size_t>(v)] = stage_pass(v, bf, ef, hf);
    sc.bwd[static_cast<size_t>(v)] = stage_pass(v, bb, eb, hb);
  }
  if (splits_backward(l.schedule)) {
    const ZeroPass BI = ZeroPass::input_grad, BW = ZeroPass::weight_grad;
    const PassCost bbi = with_zero(parts.block_bi, block_p, BI, bt), bbw = with_zero(parts.block_bw, block_p, BW, bt);
    const PassCost ebi = with_zero(parts.emb_bi, emb_p, BI, 1), ebw = with_zero(parts.emb_bw, emb_p, BW, 1);
    const PassCost hbi = with_zero(parts.head_bi, emb_p, BI, 1), hbw = with_zero(parts.head_bw, emb_p, BW, 1);
    for (int v = 0; v < V; ++v) {
      sc.bwd_input.push_back(stage_pass(v, bbi, ebi, hbi));
      sc.bwd_weight.push_back(stage_pass(v, bbw, ebw, hbw));
    }
  }
  // ZeRO-3 prefetching hides block i+1's gather behind block i, so the first
  // block's forward gather has nothing to hide behind, nor the reduce-scatter
  // of the first block's gradients (the last backward) has anything after
  // it: what the per-block overlap above counted as hidden of those two is
  // exposed, once per micro-batch, on the first virtual stage.
  if (l.zero >= 3 && l.dp_cp() > 1 && layers > 0 && !fsdp_once_per_step(l)) {
    const Group g = zero_shard_group(l);
    const double extra = cl.stack.zero_per_tensor ? bt - 1 : 0;
    const double gb = static_cast<double>(grad_bytes(pb, l.zero));
    const double ag = collective_time(Collective::all_gather, block_p * static_cast<double>(pb.param), g, cl) +
                      extra * collective_time(Collective::all_gather, 0, g, cl);
    const double rs = collective_time(Collective::reduce_scatter, block_p * gb, g, cl) +
                      extra * collective_time(Collective::reduce_scatter, 0, g, cl) + replica_all_reduce(l, block_p, gb, cl);
    const double hide = 1 - cl.eff.overlap_loss;
    sc.fwd[0].dp_comm += hide * std::min(ag, parts.block_f.total());
    sc.bwd[0].dp_comm += hide * std::min(rs, parts.block_b.total());
    if (!sc.bwd_weight.empty()) sc.bwd_weight[0].dp_comm += hide * std::min(rs, parts.block_bw.total());
  }
}

// Per pipeline stage, after the last backward: gradient reduction, the tied
// embedding's all-reduce, the optimizer step and the ZeRO-1/2 parameter gather.
void price_stage_updates(const ParamSplit& split, int64_t layers, const ParallelLayout& l, const Workload& w,
                         const PrecisionBytes& pb, const Cluster& cl, StepCosts* out) {
  StepCosts& sc = *out;
  const double emb_p = split.wte;
  // ZeRO 0: all-reduce, 1: reduce-scatter (hybrid: in the shard group, then
  // the shard all-reduced across the replicas); 2/3 already reduced per micro-batch.
  const Group dp = zero_shard_group(l);  // every rank holding the same parameters (dp x cp), or a hybrid group of them
  const double bucket = 40e6;
  const double opt_bytes = w.precision == Precision::bf16 ? 30 : 28;  // + the 16-bit weight copy written
  const bool once = fsdp_once_per_step(l);  // reduced and gathered once, as ZeRO-1
  for (int s = 0; s < l.pp; ++s) {
    const double P = stage_params(split, l, layers, s);
    double reduce = 0, last = 0;
    if (l.zero <= 1 || once) {
      const Collective k = l.zero == 0 ? Collective::all_reduce : Collective::reduce_scatter;
      const double g = static_cast<double>(pb.grad);
      reduce = collective_time(k, P * g, dp, cl) + replica_all_reduce(l, P, g, cl);
      last = collective_time(k, std::min(P, bucket) * g, dp, cl) + replica_all_reduce(l, std::min(P, bucket), g, cl);
    }
    if (l.pp > 1 && (s == 0 || s == l.pp - 1) && !split.untied) {
      const double tied = collective_time(Collective::all_reduce, emb_p * static_cast<double>(grad_bytes(pb, l.zero)),
                                          Group{2, (l.pp - 1) * l.tp * l.cp * l.dp}, cl);
      reduce += tied;
      last += tied;
    }
    const double shard = l.zero >= 1 ? P / l.zero_group() : P;
    double opt = shard * opt_bytes / (cl.gpu.hbm_bw * cl.eff.hbm) + 10 * cl.eff.kernel_overhead;
    if (l.zero == 1 || l.zero == 2 || once) {
      const double gather = collective_time(Collective::all_gather, P * static_cast<double>(pb.param), dp, cl);
      const double first = collective_time(Collective::all_gather, std::min(P, bucket) * static_cast<double>(pb.param), dp, cl);
      // Overlapped with the next forward, but for its first bucket.
      opt += cl.stack.dp_overlap ? first + cl.eff.overlap_loss * (gather - first) : gather;
    }
    sc.dp_reduce.push_back(reduce);
    sc.dp_last_bucket.push_back(last);
    sc.optimizer.push_back(opt);
  }
}

}  // namespace

StepCosts price_step(const PartCosts& parts, const ParamSplit& split, int64_t layers, const ParallelLayout& l,
                     const Workload& w, const Cluster& cl) {
  const PrecisionBytes pb = precision_bytes(w.precision, cl.stack);
  StepCosts sc;
  sc.peak_flops = parts.peak_flops;
  price_virtual_stages(parts, split, layers, l, pb, cl, &sc);
  // Point-to-point: 1/tp of an activation, then re-gathered over tp (with
  // sequence parallelism the activation is already 1/tp per rank); a stack
  // without the scatter/gather sends the whole activation from every rank.
  const double act = parts.act_bytes;
  const bool sharded = l.sequence_parallel && l.tp > 1;
  const bool scattered = !sharded && l.tp > 1 && cl.stack.p2p_scatter_gather;
  sc.p2p = p2p_time(sharded || scattered ? act / l.tp : act, l.tp * l.cp * l.dp, cl);
  if (scattered) sc.p2p += collective_time(Collective::all_gather, act, Group{l.tp, 1}, cl);
  price_stage_updates(split, layers, l, w, pb, cl, &sc);
  sc.step_overhead = cl.eff.step_overhead;
  return sc;
}

}  // namespace tera
