// Per-instruction costs of one training step on a cluster: what a forward or
// backward of each virtual stage takes (and, for zb-h1, the backward's B and
// W apart), a point-to-point message, the
// data-parallel gradient reduction and the optimizer step per physical
// stage. GEMMs run at peak x gemm_max x f(m) f(n) f(k) with f(d) = d/(d + half)
// (small dims waste tiles and waves), or at the HBM speed of their operands
// when that is slower (a roofline), memory-bound ops at HBM bandwidth x hbm,
// fused attention at peak x flash on the FLOPs it performs, plus a launch
// overhead per kernel. Tensor-parallel collectives are exposed (or hidden
// behind the pass's GEMMs when the stack overlaps them); ZeRO-2/3 collectives
// overlap the pass they serve; whatever overlaps pays overlap_loss
// (hardware.h: max(a, b) + overlap_loss * min(a, b)). The simulator (simulator.h) prices the
// schedule's instruction lists with these numbers.
#pragma once

#include <vector>

#include "model/model_spec.h"
#include "plan/hardware.h"
#include "plan/layer_ops.h"
#include "plan/layout.h"
#include "plan/memory_model.h"

namespace tera {

// Seconds, by class. dp_comm is the exposed part of ZeRO-2/3 traffic.
// rc_* are the part of gemm, attention and memory that re-runs the forward
// (activation recompute inside the backward): already in those classes and
// not in total(), kept apart so a breakdown can show recompute on its own.
struct PassCost {
  double gemm = 0, attention = 0, memory = 0, tp_comm = 0, dp_comm = 0;
  double rc_gemm = 0, rc_attention = 0, rc_memory = 0;
  double compute() const { return gemm + attention + memory; }
  double recompute() const { return rc_gemm + rc_attention + rc_memory; }
  double total() const { return compute() + tp_comm + dp_comm; }
  PassCost& operator+=(const PassCost& o);
  PassCost scaled(double f) const;
};

struct StepCosts {
  std::vector<PassCost> fwd, bwd;  // per virtual stage: cost of its F and B instructions
  // Per virtual stage, a schedule that splits the backward (zb-h1): its B
  // instruction (the input gradient, the recomputed forward, the backward's
  // tensor-parallel collectives and ZeRO-3 gather) and its weight_grad W (the
  // dW GEMMs and the embedding's row gradients, with the ZeRO-2/3
  // reduce-scatter). Empty when the layout's schedule does not split it.
  std::vector<PassCost> bwd_input, bwd_weight;
  double p2p = 0;                  // one activation or gradient message between adjacent stages
  // Per physical stage:
  std::vector<double> dp_reduce;       // gradient reduction of the whole stage (reduce_grads)
  std::vector<double> dp_last_bucket;  // the part that cannot overlap backward
  std::vector<double> optimizer;       // optimizer step incl. the exposed ZeRO parameter gather
  double step_overhead = 0;
  double peak_flops = 0;  // per GPU, for MFU
};

// A GEMM's fraction of peak: gemm_max at the tensor clock, times
// wave_efficiency over m and n on the GPU's SMs and f(k), f(d) = d / (d +
// gemm_half_dim); on a device with no SM count, f(m) f(n) f(k).
double gemm_efficiency(const Op& op, const GpuSpec& gpu, const Efficiency& e);
double op_time(const Op& op, const Cluster& cl, double peak_flops);
// Prices one pass: compute by class and its tensor-parallel collectives.
// GEMMs (OpClass::gemm) run at gemm_peak (the fp8 peak for fp8 linear layers;
// <= 0: peak_flops).
// Context-parallel K/V traffic (p.cp_comm) over the cp group is overlapped
// with the pass's attention; its exposed part is counted as tp_comm
// (model-parallel communication).
PassCost price_pass(const PassOps& p, const Cluster& cl, double peak_flops, int tp, double gemm_peak = 0, int cp = 1);

// Peak FLOP/s for the workload's precision; fails if the GPU lacks it.
Expected<double> peak_flops(const Cluster& cl, Precision p);
// Peak of the linear layers' GEMMs: the fp8 peak for fp8 GEMMs (fails if the
// GPU has none), else peak_flops.
Expected<double> gemm_peak_flops(const Cluster& cl, const Workload& w);

StepCosts price_step(const ModelSpec& spec, const ParallelLayout& l, const Workload& w, const Cluster& cl);

// The same in two parts, so a search can reuse the first: the passes of a
// block, the embedding and the head (compute and tensor-parallel
// collectives; they depend on tp, micro-batch, sequence parallelism and
// recompute only), then the step around them.
struct PartCosts {
  PassCost block_f, block_b, emb_f, emb_b, head_f, head_b;
  // Each backward split as zb-h1 runs it (layer_ops.h split_backward): B
  // (with the recomputed forward) and W.
  PassCost block_bi, block_bw, emb_bi, emb_bw, head_bi, head_bw;
  double peak_flops = 0;
  double act_bytes = 0;  // one activation [B, T, C]
  int block_tensors = 1; // parameter tensors of one block (ZeRO collectives per block, per tensor)
};
PartCosts price_parts(const ModelSpec& spec, const ParallelLayout& l, const Workload& w, const Cluster& cl);
StepCosts price_step(const PartCosts& parts, const ParamSplit& split, int64_t layers, const ParallelLayout& l,
                     const Workload& w, const Cluster& cl);

}  // namespace tera
