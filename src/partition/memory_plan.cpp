// The memory plan: ZeRO buffer sizes from the parameter units, activation and
// workspace buffers from ModelSpec's tables; see memory_plan.h.
#include "partition/memory_plan.h"

#include <algorithm>

#include "core/check.h"
#include "partition/param_table.h"

namespace tera {

const char* memory_class_name(MemoryClass c) {
  switch (c) {
    case MemoryClass::parameters: return "parameters";
    case MemoryClass::gradients: return "gradients";
    case MemoryClass::optimizer: return "optimizer state";
    case MemoryClass::zero_staging: return "ZeRO staging";
    case MemoryClass::comm_buckets: return "communication buckets";
    case MemoryClass::zero_gather: return "ZeRO gather";
    case MemoryClass::activations: return "activations";
    case MemoryClass::workspace: return "workspace";
  }
  return "?";
}

std::vector<UnitShape> unit_shapes(const ParamTable& table) {
  std::vector<UnitShape> out;
  for (size_t u = 0; u < table.units().size(); ++u) {
    const ParamUnit& unit = table.units()[u];
    UnitShape s;
    s.floats = unit.size();
    s.dedicated = table.dedicated(static_cast<int>(u));
    for (int i = unit.first_entry; i < unit.end_entry; ++i) {
      const ParamEntry& e = table.entries()[static_cast<size_t>(i)];
      s.data.push_back({e.offset - unit.begin, e.offset - unit.begin + e.count});
    }
    out.push_back(std::move(s));
  }
  return out;
}

ZeroSizes zero_sizes(const std::vector<UnitShape>& units, int dp, int dp_rank, int zero) {
  TERA_ASSERT(dp >= 1 && dp_rank >= 0 && dp_rank < dp && zero >= 0 && zero <= 3);
  ZeroSizes z;
  int64_t total = 0, max_block = 0, max_chunk = 0, dedicated_floats = 0, dedicated_units = 0;
  int64_t all_data = 0, rank_data = 0;
  for (const UnitShape& u : units) {
    TERA_ASSERT(u.floats % (int64_t{dp} * ArenaLayout::kAlignFloats) == 0, "units must be padded to dp * 16 floats");
    const int64_t chunk = u.floats / dp, begin = int64_t{dp_rank} * chunk, end = begin + chunk;
    int64_t data = 0, mine = 0;
    for (const auto& [b, e] : u.data) {
      data += e - b;
      mine += std::max<int64_t>(0, std::min(end, e) - std::max(begin, b));
    }
    total += u.repeat * u.floats;
    z.shard += u.repeat * chunk;
    all_data += u.repeat * data;
    rank_data += u.repeat * mine;
    max_chunk = std::max(max_chunk, chunk);
    if (u.dedicated) {
      dedicated_floats += u.repeat * u.floats;
      dedicated_units += u.repeat;
    } else if (u.repeat > 0) {
      max_block = std::max(max_block, u.floats);
    }
  }
  const int64_t pool = max_block > 0 ? 2 : 0;  // block buffers: the one in use and the next
  z.params = zero == 3 ? z.shard : total;
  if (zero <= 1) z.grads = total;
  if (zero >= 1) z.grad_shard = z.shard;
  if (zero >= 2) {
    z.staging = dedicated_floats + pool * max_block;
    z.temps = (dedicated_units + pool) * max_chunk;
  }
  if (zero == 3) z.gathered = dedicated_floats + pool * max_block;
  z.moments = zero == 0 ? all_data : rank_data;
  return z;
}

MemoryReport MemoryPlan::report() const {
  return report_by_class([&](MemoryClass c) { return bytes(c); });
}

int64_t MemoryPlan::total() const { return report().total(); }

namespace {

void add_if(ArenaLayout& a, const char* name, DType t, int64_t count) {
  if (count > 0) a.add(name, t, count);
}

void plan_parameter_state(const MemoryPlanInput& in, MemoryPlan& plan) {
  const ZeroSizes z = zero_sizes(in.units, in.dp, in.dp_rank, in.zero);
  const DType w = in.compute;  // compute weights (fp32: they are also the masters)
  add_if(plan.mutable_arena(MemoryClass::parameters), "params", w, z.params);
  add_if(plan.mutable_arena(MemoryClass::gradients), "grads", DType::f32, z.grads);
  add_if(plan.mutable_arena(MemoryClass::gradients), "grad_shard", DType::f32, z.grad_shard);
  ArenaLayout& opt = plan.mutable_arena(MemoryClass::optimizer);
  if (w != DType::f32) add_if(opt, "master", DType::f32, in.zero == 0 ? z.params : z.shard);
  add_if(opt, "adam_m", DType::f32, z.moments);
  add_if(opt, "adam_v", DType::f32, z.moments);
  add_if(plan.mutable_arena(MemoryClass::zero_staging), "grad_staging", DType::f32, z.staging);
  add_if(plan.mutable_arena(MemoryClass::comm_buckets), "reduce_scatter_out", DType::f32, z.temps);
  add_if(plan.mutable_arena(MemoryClass::zero_gather), "gathered_params", w, z.gathered);
  if (in.act.gemm == DType::bf16) {  // the bf16 copy the linear layers read
    add_if(plan.mutable_arena(MemoryClass::parameters), "compute_weights", DType::bf16, in.zero == 3 ? 0 : z.params);
    add_if(plan.mutable_arena(MemoryClass::zero_gather), "gathered_compute_weights", DType::bf16, z.gathered);
  }
}

void add_table(ArenaLayout& a, const std::string& prefix, const std::vector<BufferInfo>& table, int64_t repeat) {
  if (repeat <= 0) return;
  for (const BufferInfo& b : table) a.add(prefix + b.name, b.dtype, numel(b.shape), repeat);
}

// The boundary buffers of every kind of chunk in `kinds`, each name once (a
// buffer of the same name has the same shape in every chunk).
std::vector<BufferInfo> boundary_union(const ModelSpec& spec, int64_t B, int64_t T, const ActivationOptions& act, int kinds) {
  std::vector<BufferInfo> out;
  for (int k = 0; k < 4; ++k) {
    if (!(kinds & (1 << k))) continue;
    for (BufferInfo& b : spec.chunk_activations(B, T, act, (k & 2) != 0, (k & 1) != 0)) {
      const bool have = std::any_of(out.begin(), out.end(), [&](const BufferInfo& o) { return o.name == b.name; });
      if (!have) out.push_back(std::move(b));
    }
  }
  return out;
}

void plan_activations(const ModelSpec& spec, const MemoryPlanInput& in, MemoryPlan& plan) {
  TERA_ASSERT(in.slots >= 1, "a stage holds at least one micro-batch");
  const int64_t B = in.micro_batch, T = in.seq_len;
  ArenaLayout& a = plan.mutable_arena(MemoryClass::activations);
  add_table(a, "slot.", boundary_union(spec, B, T, in.act, chunk_kinds(in.stage)), in.slots);
  const int64_t layers = largest_chunk_layers(in.stage);
  add_table(a, "slot.h.", spec.saved_block_activations(B, T, in.act), int64_t{in.slots} * layers);
  // The block being recomputed holds its whole working set (full), or the
  // dropped attention scores (selective).
  if (layers > 0 && in.act.recompute == Recompute::full) {
    add_table(a, "recompute.", spec.block_activations(B, T, in.act), 1);
  }
  if (layers > 0 && in.act.recompute == Recompute::selective) {
    std::vector<BufferInfo> dropped;
    for (const BufferInfo& b : spec.block_activations(B, T, in.act)) {
      if (b.name.rfind("probs", 0) == 0) dropped.push_back(b);
    }
    add_table(a, "recompute.", dropped, 1);
  }
}

void plan_workspace(const ModelSpec& spec, const MemoryPlanInput& in, MemoryPlan& plan) {
  ArenaLayout& w = plan.mutable_arena(MemoryClass::workspace);
  const bool head = in.stage.has_head();
  for (const BufferInfo& b : spec.workspace(in.micro_batch, in.seq_len, in.act)) {
    if (!b.head_only || head) w.add(b.name, b.dtype, numel(b.shape));
  }
  int64_t units = 0;
  for (const UnitShape& u : in.units) units += u.repeat;
  w.add("step_scalars", DType::f64, StepScalars::count(units));
}

}  // namespace

MemoryPlan plan_memory(const ModelSpec& spec, const MemoryPlanInput& in) {
  TERA_ASSERT(in.act.dtype == in.compute, "activations are kept in the compute dtype");
  TERA_ASSERT(in.act.flash_attention == (spec.config().attention == AttentionKind::flash),
              "the plan's attention is the model's (model.attention)");
  MemoryPlan plan;
  for (MemoryClass c : kAllMemoryClasses) plan.mutable_arena(c) = ArenaLayout(memory_class_name(c));
  plan_parameter_state(in, plan);
  plan_activations(spec, in, plan);
  plan_workspace(spec, in, plan);
  // The named arenas and the planner's byte count are one plan.
  int64_t units = 0;
  for (const UnitShape& u : in.units) units += u.repeat;
  const MemoryReport bytes =
      memory_plan_bytes(zero_sizes(in.units, in.dp, in.dp_rank, in.zero), in.zero, in.compute, in.act.gemm,
                        activation_table_bytes(spec, in.micro_batch, in.seq_len, in.act), in.act.recompute, in.stage,
                        in.slots, units);
  TERA_ASSERT(bytes.bytes == plan.report().bytes, "memory_plan_bytes disagrees with plan_memory");
  return plan;
}

ActivationTableBytes activation_table_bytes(const ModelSpec& spec, int64_t B, int64_t T, const ActivationOptions& act) {
  ActivationTableBytes t;
  t.saved_layer = table_bytes(spec.saved_block_activations(B, T, act));
  for (int kinds = 1; kinds < 16; ++kinds) t.boundary[kinds] = table_bytes(boundary_union(spec, B, T, act, kinds));
  if (act.recompute == Recompute::full) t.working = table_bytes(spec.block_activations(B, T, act));
  if (act.recompute == Recompute::selective) {
    for (const BufferInfo& b : spec.block_activations(B, T, act)) {
      if (b.name.rfind("probs", 0) == 0) t.working += ArenaLayout::aligned_bytes(b.dtype, numel(b.shape));
    }
  }
  for (const BufferInfo& b : spec.workspace(B, T, act)) {
    (b.head_only ? t.workspace_head : t.workspace_all) += ArenaLayout::aligned_bytes(b.dtype, numel(b.shape));
  }
  return t;
}

int chunk_kinds(const StagePlan& stage) {
  int kinds = 0;
  for (const ChunkPlan& ch : stage.chunks) kinds |= 1 << (2 * ch.embedding + ch.head);
  return kinds;
}

int64_t largest_chunk_layers(const StagePlan& stage) {
  int64_t n = 0;
  for (const ChunkPlan& ch : stage.chunks) n = std::max(n, ch.num_layers);
  return n;
}

MemoryReport memory_plan_bytes(const ZeroSizes& z, int zero, DType compute, DType gemm, const ActivationTableBytes& t,
                               Recompute recompute, const StagePlan& stage, int slots, int64_t units) {
  auto f32 = [](int64_t n) { return ArenaLayout::aligned_bytes(DType::f32, n); };
  auto w = [&](int64_t n) { return ArenaLayout::aligned_bytes(compute, n); };
  MemoryReport r;
  r[MemoryClass::parameters] = w(z.params);
  r[MemoryClass::gradients] = f32(z.grads) + f32(z.grad_shard);
  r[MemoryClass::optimizer] = 2 * f32(z.moments) + (compute != DType::f32 ? f32(zero == 0 ? z.params : z.shard) : 0);
  r[MemoryClass::zero_staging] = f32(z.staging);
  r[MemoryClass::comm_buckets] = f32(z.temps);
  r[MemoryClass::zero_gather] = w(z.gathered);
  if (gemm == DType::bf16) {
    auto bf16 = [](int64_t n) { return ArenaLayout::aligned_bytes(DType::bf16, n); };
    r[MemoryClass::parameters] += bf16(zero == 3 ? 0 : z.params);
    r[MemoryClass::zero_gather] += bf16(z.gathered);
  }
  const int64_t layers = largest_chunk_layers(stage);
  r[MemoryClass::activations] = slots * (t.boundary[chunk_kinds(stage)] + layers * t.saved_layer);
  if (layers > 0 && recompute != Recompute::none) r[MemoryClass::activations] += t.working;
  r[MemoryClass::workspace] = t.workspace_all + (stage.has_head() ? t.workspace_head : 0) +
                              ArenaLayout::aligned_bytes(DType::f64, StepScalars::count(units));
  return r;
}

}  // namespace tera
