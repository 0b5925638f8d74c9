// The planner's memory: the rank plan (partition/rank_plan.h) of the
// layout's fullest stage, plus the allocator and framework allowances.
#include "plan/memory_model.h"

#include <algorithm>

#include "core/check.h"
#include "partition/layout_check.h"

namespace tera {

double MemoryBreakdown::states() const {
  double s = 0;
  for (MemoryClass c : kAllMemoryClasses) {
    if (c != MemoryClass::activations && c != MemoryClass::workspace) s += static_cast<double>(plan[c]);
  }
  return s;
}

ParamSplit param_split(const ModelSpec& spec, int tp) {
  const int64_t L = spec.config().layers;
  ParamSplit t;
  for (const auto& p : spec.params()) {
    // The local elements the runtime allocates (ModelSpec::local_shape: the
    // spec's own tensor-parallel split of each tensor).
    const double n = static_cast<double>(numel(spec.local_shape(p, tp)));
    if (p.layer == 0) t.block += n;
    else if (p.token_embedding) t.wte += n;
    else if (p.layer < 0) t.wpe += n;
    else if (p.layer == L) t.lnf += n;
  }
  return t;
}

double stage_params(const ParamSplit& p, const ParallelLayout& l, int64_t layers, int stage) {
  const bool first = stage == 0, last = stage == l.pp - 1;
  double stage_layers = 0;
  for (int c = 0; c < l.vpp; ++c) stage_layers += static_cast<double>(layers_in_virtual_stage(l, layers, c * l.pp + stage));
  // With one stage the tied output embedding is the input one, counted once;
  // an untied head is always its own.
  return stage_layers * p.block + (first ? p.wte + p.wpe : 0) + (last ? p.lnf : 0) +
         (last && (!first || p.untied) ? p.wte : 0);
}

int64_t stage_params(const ModelSpec& spec, const ParallelLayout& l, int stage) {
  return static_cast<int64_t>(stage_params(param_split(spec, l.tp), l, spec.config().layers, stage));
}

RankPrecision rank_precision(const Workload& w, const Cluster& cl) {
  return RankPrecision{.gemm = gemm_input_dtype(w.precision, cl.stack),
                       .activations = precision_bytes(w.precision, cl.stack).act,
                       .flash_attention = cl.stack.flash_attention,
                       .dropout = cl.stack.dropout};
}

double op_sac_saved_per_token(const ModelSpec& spec, int tp, bool sequence_parallel) {
  const ModelConfig& c = spec.config();
  const double t = tp, C = static_cast<double>(c.hidden), F = static_cast<double>(c.ffn()) / t;
  // Query and key/value widths on one rank (tp > kv_heads replicates a key/value head).
  const double q = C / t, kv = static_cast<double>(spec.kv_heads_local(tp) * c.head_size());
  // The odd-numbered matmuls' outputs, elements per token on one rank (a
  // row-parallel output is the whole hidden). Gated (torchtitan's Llama,
  // separate projections wq wk wv wo w1 w3 w2): wq, wv, w1, w2. Standard
  // (fused qkv, proj, fc, fc2): qkv, fc.
  const double matmuls = c.mlp == MlpKind::gated ? q + kv + F + C : static_cast<double>(spec.qkv_width_local(tp)) + F;
  const double reduce_scatters = sequence_parallel && tp > 1 ? 2 * C / t : 0;
  return q + matmuls + reduce_scatters;  // q: the attention kernel's output
}

MemoryReport MemoryTables::rank_plan(const ParallelLayout& l, int stage, int zero_rank) {
  const ParallelLayout::Coord coord{.tp = 0, .pp = stage, .dp = zero_rank / l.cp, .cp = zero_rank % l.cp};
  if (!cl_.stack.op_level_sac || l.recompute != Recompute::selective) return planner_.plan(l, coord).bytes;
  // Op-level SAC: what full recompute holds (each block's input, one block's
  // working set while it re-runs) plus the tensors its policy saves, for
  // every block of the stage and every micro-batch in flight.
  ParallelLayout full = l;
  full.recompute = Recompute::full;
  const RankPlan r = planner_.plan(full, coord);
  MemoryReport bytes = r.bytes;
  const double tokens = static_cast<double>(l.micro_batch) * static_cast<double>(r.seq_len);
  const double per_block = op_sac_saved_per_token(spec_, l.tp, l.sequence_parallel) * tokens * static_cast<double>(dtype_bytes(pb_.act));
  // Each slot holds one micro-batch of one chunk (an interleaved stage's
  // slots count (micro-batch, chunk) pairs), as the rank plan counts them.
  bytes[MemoryClass::activations] +=
      static_cast<int64_t>(per_block * static_cast<double>(largest_chunk_layers(r.stage)) * static_cast<double>(r.slots));
  return bytes;
}

MemoryBreakdown MemoryTables::with_allowances(const ParallelLayout& l, const MemoryReport& plan, int stage) const {
  MemoryBreakdown m;
  m.stage = stage;
  m.plan = plan;
  m.fsdp_unsharded = fsdp_unsharded(l, stage);
  m.allocator = cl_.memory.fragmentation * m.model();
  m.reserved = cl_.memory.reserved_bytes;
  return m;
}

double MemoryTables::fsdp_unsharded(const ParallelLayout& l, int stage) const {
  if (l.reshard_after_forward || l.zero < 3 || l.dp_cp() <= 1) return 0;
  ParamSplit split = param_split(spec_, l.tp);
  split.untied = untied_;
  // The blocks' parameters, all gathered at once (the plan holds two blocks' gathers).
  double stage_layers = 0;
  for (int c = 0; c < l.vpp; ++c) {
    stage_layers += static_cast<double>(layers_in_virtual_stage(l, spec_.config().layers, c * l.pp + stage));
  }
  double bytes = std::max(0.0, stage_layers - 2) * split.block * static_cast<double>(pb_.param);
  // Pipelined: gradients accumulated unsharded over the step (the plan holds a chunk of them).
  if (l.pp > 1) {
    const double P = stage_params(split, l, spec_.config().layers, stage);
    bytes += P * (1 - 1.0 / l.zero_group()) * static_cast<double>(grad_bytes(pb_, l.zero));
  }
  return bytes;
}

MemoryBreakdown MemoryTables::per_gpu(const ParallelLayout& l) {
  MemoryBreakdown worst;
  for (int s = 0; s < l.pp; ++s) {
    MemoryBreakdown m = with_allowances(l, rank_plan(l, s), s);
    if (s == 0 || m.total() > worst.total()) worst = m;
  }
  return worst;
}

MemoryBreakdown memory_per_gpu(const ModelSpec& spec, const ParallelLayout& l, const Workload& w, const Cluster& cl) {
  MemoryTables t(spec, w, cl);
  return t.per_gpu(l);
}

MemoryBreakdown stage_memory(const ModelSpec& spec, const ParallelLayout& l, const Workload& w, const Cluster& cl,
                             int stage) {
  MemoryTables t(spec, w, cl);
  return t.with_allowances(l, t.rank_plan(l, stage), stage);
}

}  // namespace tera
