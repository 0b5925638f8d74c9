// The memory model. The tensor-parallel split of each parameter is the
// spec's own (ModelSpec::local_shape, what the runtime allocates: Megatron's
// column-parallel QKV and fc/gate, row-parallel output projections,
// replicated norms and position embeddings, vocab-parallel token embedding);
// activation and workspace tables are ModelSpec's. The data-parallel bucket
// is Megatron's 40M-element default.
#include "plan/memory_model.h"

#include <algorithm>

namespace tera {

namespace {

constexpr double kBucketElements = 40e6;

}  // namespace

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

ActivationOptions activation_options(const ParallelLayout& l, const Workload& w, const Cluster& cl) {
  ActivationOptions o;
  o.tp = l.tp;
  o.sequence_parallel = l.sequence_parallel && l.tp > 1;
  o.recompute = l.recompute;
  o.dtype = precision_bytes(w.precision).act;
  o.flash_attention = cl.stack.flash_attention;
  o.dropout = cl.stack.dropout;
  return o;
}

LayoutTables layout_tables(const ModelSpec& spec, const ParallelLayout& l, const Workload& w, const Cluster& cl) {
  const ActivationOptions ao = activation_options(l, w, cl);
  // Context parallelism holds 1/cp of each sequence's activations (flash
  // attention assumed: no T x T scores are kept).
  const int64_t B = l.micro_batch, T = spec.config().seq_len / l.cp;
  LayoutTables t;
  t.params = param_split(spec, l.tp);
  t.params.untied = w.untied_embeddings;
  t.saved = static_cast<double>(table_bytes(spec.saved_block_activations(B, T, ao)));
  t.full = static_cast<double>(table_bytes(spec.block_activations(B, T, ao)));
  for (bool embedding : {false, true}) {
    for (bool head : {false, true}) {
      t.boundary[embedding][head] = static_cast<double>(table_bytes(spec.chunk_activations(B, T, ao, embedding, head)));
    }
  }
  for (const auto& b : spec.workspace(B, T, ao)) (b.head_only ? t.ws_head : t.ws_all) += static_cast<double>(table_bytes({b}));
  t.act = static_cast<double>(B * T * spec.config().hidden * dtype_bytes(ao.dtype));
  t.layers = spec.config().layers;
  return t;
}

namespace {

MemoryBreakdown stage_memory_from(const LayoutTables& t, const ParallelLayout& l, const Workload& w, const Cluster& cl,
                                  int64_t layers, int stage, int in_flight) {
  const PrecisionBytes pb = precision_bytes(w.precision);
  const bool first = stage == 0, last = stage == l.pp - 1;
  const double P = stage_params(t.params, l, layers, stage);
  const double dp = l.dp_cp();  // ZeRO shards over every rank holding the same parameters
  MemoryBreakdown m;
  m.stage = stage;
  m.params = P * static_cast<double>(pb.param) / (l.zero >= 3 ? dp : 1);
  m.grads = P * static_cast<double>(grad_bytes(pb, l.zero)) / (l.zero >= 2 ? dp : 1);
  m.optimizer = P * static_cast<double>(pb.master + pb.moments) / (l.zero >= 1 ? dp : 1);
  if (l.zero >= 3 && l.dp_cp() > 1) m.zero3_gather = 2 * std::max(t.params.block, t.params.wte) * static_cast<double>(pb.param);
  // Every in-flight chunk holds its layers' saved tables; counted at the
  // stage's largest chunk (1F1B has one chunk per stage; balanced interleaved
  // chunks differ by at most a layer, the first being the largest).
  int64_t largest_chunk = 0;
  for (int c = 0; c < l.vpp; ++c) largest_chunk = std::max(largest_chunk, layers_in_virtual_stage(l, layers, c * l.pp + stage));
  const double chunk_layers = static_cast<double>(largest_chunk);
  m.activations = in_flight * (chunk_layers * t.saved + t.boundary[first][last]);
  // The block being recomputed holds its full working set (full), or the
  // dropped attention scores (selective).
  if (l.recompute == Recompute::full) m.activations += t.full;
  if (l.recompute == Recompute::selective) m.activations += t.full - t.saved;
  m.workspace = t.ws_all + (last ? t.ws_head : 0);
  // Send/receive buffers for activations and gradients, the
  // sequence-parallel gather output, one data-parallel bucket.
  if (l.pp > 1) m.comm_buffers += 4 * t.act / l.tp;
  if (l.sequence_parallel && l.tp > 1) m.comm_buffers += t.act;
  if (l.dp_cp() > 1 && l.zero >= 1) m.comm_buffers += std::min(P, kBucketElements) * static_cast<double>(grad_bytes(pb, l.zero));
  m.fragmentation = cl.memory.fragmentation * (m.params + m.grads + m.optimizer + m.zero3_gather + m.activations +
                                               m.workspace + m.comm_buffers);
  m.reserved = cl.memory.reserved_bytes;
  return m;
}

template <typename InFlight>
MemoryBreakdown worst_stage(const LayoutTables& t, const ParallelLayout& l, const Workload& w, const Cluster& cl,
                            InFlight in_flight) {
  MemoryBreakdown worst;
  for (int s = 0; s < l.pp; ++s) {
    MemoryBreakdown m = stage_memory_from(t, l, w, cl, t.layers, s, in_flight(s));
    if (s == 0 || m.total() > worst.total()) worst = m;
  }
  return worst;
}

}  // namespace

MemoryBreakdown stage_memory(const ModelSpec& spec, const ParallelLayout& l, const Workload& w, const Cluster& cl, int stage,
                             int in_flight) {
  return stage_memory_from(layout_tables(spec, l, w, cl), l, w, cl, spec.config().layers, stage, in_flight);
}

MemoryBreakdown memory_per_gpu(const LayoutTables& t, const ParallelLayout& l, const Workload& w, const Cluster& cl) {
  const int M = static_cast<int>(std::min<int64_t>(micro_batches(l, w), 1 << 30));
  return worst_stage(t, l, w, cl, [&](int s) { return promised_in_flight(l.schedule, l.pp, M, l.vpp, s); });
}

MemoryBreakdown memory_per_gpu(const ModelSpec& spec, const ParallelLayout& l, const Workload& w, const Cluster& cl) {
  return memory_per_gpu(layout_tables(spec, l, w, cl), l, w, cl);
}

MemoryBreakdown memory_per_gpu(const ModelSpec& spec, const ParallelLayout& l, const Workload& w, const Cluster& cl,
                               const Schedule& sch) {
  return worst_stage(layout_tables(spec, l, w, cl), l, w, cl, [&](int s) { return sch.max_in_flight(s); });
}

}  // namespace tera
