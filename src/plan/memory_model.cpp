// The planner's memory: the runtime's memory plan for the layout's fullest
// stage, plus the allocator and framework allowances. The tensor-parallel
// split of each parameter is the spec's own (ModelSpec::local_shape) and the
// parameter units are the runtime's ParamTable units; activation and
// workspace bytes are ModelSpec's tables; the slots are the schedule's
// in-flight micro-batches.
#include "plan/memory_model.h"

#include <algorithm>

#include "core/check.h"
#include "model/layout_check.h"
#include "model/param_table.h"

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

ActivationOptions activation_options(const ParallelLayout& l, const Workload& w, const Cluster& cl) {
  ActivationOptions o;
  o.tp = l.tp;
  o.sequence_parallel = l.sequence_parallel;
  o.recompute = l.recompute;
  o.dtype = precision_bytes(w.precision, cl.stack).act;
  o.flash_attention = cl.stack.flash_attention;
  o.dropout = cl.stack.dropout;
  o.gemm = gemm_input_dtype(w.precision, cl.stack);
  return o;
}

// ModelSpec's table bytes for the layout's micro-batch; context parallelism
// holds 1/cp of each sequence's activations.
const ActivationTableBytes& MemoryTables::tables(const ParallelLayout& l) {
  const auto key = std::make_tuple(l.tp, l.cp, l.micro_batch, l.sequence_parallel, l.recompute);
  auto it = tables_.find(key);
  if (it == tables_.end()) {
    const int64_t T = spec_.config().seq_len / l.cp;
    it = tables_.emplace(key, activation_table_bytes(spec_, l.micro_batch, T, activation_options(l, w_, cl_))).first;
  }
  return it->second;
}

// The runtime's parameter units for tp rank 0 with units padded for a ZeRO
// group of dp ranks, read off ParamTables of one-layer stage plans: the units
// of a first stage (token embedding, io: wpe), a last stage (ln_f, and the
// token embedding when tied to the head, or an lm_head of its own) and a
// single one, each followed by one block.
const MemoryTables::Units& MemoryTables::units(int tp, int dp) {
  const auto key = std::make_pair(tp, dp);
  auto it = units_.find(key);
  if (it != units_.end()) return it->second;
  Units u;
  auto end_units = [&](bool embedding, bool head) {
    StagePlan plan;
    plan.chunks.push_back(ChunkPlan{.virtual_stage = 0, .first_layer = 0, .num_layers = 1, .embedding = embedding, .head = head});
    const ParamTable table(spec_, int64_t{dp} * ArenaLayout::kAlignFloats, tp, 0, plan);
    TERA_ASSERT(!table.units().empty() && table.units().back().layer == 0, "a one-layer stage ends with its block");
    std::vector<UnitShape> shapes = unit_shapes(table);
    u.block = shapes.back();
    shapes.pop_back();
    return shapes;
  };
  u.first = end_units(true, false);
  u.last = end_units(false, true);
  u.both = end_units(true, true);
  return units_.emplace(key, std::move(u)).first->second;
}

MemoryReport MemoryTables::rank_plan(const ParallelLayout& l, int stage, int dp_rank) {
  auto per = layers_per_virtual_stage(spec_.config().layers, l.pp, l.vpp, l.stage_layers);
  TERA_ASSERT(per.ok(), per.ok() ? std::string() : per.error());
  const StagePlan plan = make_stage_plan(*per, l.pp, stage);
  const int dp = l.dp_cp();  // ZeRO shards over every rank holding the same parameters
  const Units& u = units(l.tp, dp);
  const bool emb = plan.has_embedding(), head = plan.has_head();
  std::vector<UnitShape> stage_units = emb && head ? u.both : emb ? u.first : head ? u.last : std::vector<UnitShape>{};
  UnitShape blocks = u.block;
  blocks.repeat = plan.num_layers();
  int64_t unit_count = static_cast<int64_t>(stage_units.size()) + blocks.repeat;
  if (blocks.repeat > 0) stage_units.push_back(blocks);
  const ZeroSizes z = zero_sizes(stage_units, dp, dp_rank, l.zero);
  // Slots: the micro-batches the schedule keeps in flight on the stage
  // (promised_in_flight: the tests hold it equal to the built schedule's).
  const int slots = promised_in_flight(l.schedule, l.pp, static_cast<int>(micro_batches(l, w_)), l.vpp, stage);
  const ActivationOptions o = activation_options(l, w_, cl_);
  return memory_plan_bytes(z, l.zero, o.dtype, o.gemm, tables(l), l.recompute, plan, slots, unit_count);
}

MemoryBreakdown MemoryTables::with_allowances(const MemoryReport& plan, int stage) const {
  MemoryBreakdown m;
  m.stage = stage;
  m.plan = plan;
  m.allocator = cl_.memory.fragmentation * m.model();
  m.reserved = cl_.memory.reserved_bytes;
  return m;
}

MemoryBreakdown MemoryTables::per_gpu(const ParallelLayout& l) {
  MemoryBreakdown worst;
  for (int s = 0; s < l.pp; ++s) {
    MemoryBreakdown m = with_allowances(rank_plan(l, s), s);
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
  return t.with_allowances(t.rank_plan(l, stage), stage);
}

}  // namespace tera
