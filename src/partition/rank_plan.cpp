// The rank plan; see rank_plan.h.
#include "partition/rank_plan.h"

#include <fmt/format.h>

#include "core/check.h"
#include "partition/layout_check.h"

namespace tera {

namespace {
// Units with the same floats, data ranges and kind (repeat aside).
bool same_shape(const UnitShape& a, const UnitShape& b) {
  return a.floats == b.floats && a.data == b.data && a.dedicated == b.dedicated;
}
}  // namespace

std::vector<UnitShape> fold_units(const std::vector<UnitShape>& units) {
  std::vector<UnitShape> out;
  for (const UnitShape& u : units) {
    if (!out.empty() && same_shape(out.back(), u)) {
      out.back().repeat += u.repeat;
    } else {
      out.push_back(u);
    }
  }
  return out;
}

Expected<StagePlan> stage_plan_of(const ParallelLayout& l, int64_t layers, int stage) {
  auto per = layers_per_virtual_stage(layers, l.pp, l.vpp, l.stage_layers);
  if (!per) return per.status();
  return make_stage_plan(*per, l.pp, stage);
}

ActivationOptions activation_options(const ParallelLayout& l, const RankPrecision& precision) {
  return ActivationOptions{.tp = l.tp,
                           .sequence_parallel = l.sequence_parallel,
                           .recompute = l.recompute,
                           .dtype = precision.activations,
                           .flash_attention = precision.flash_attention,
                           .dropout = precision.dropout,
                           .gemm = precision.gemm,
                           .cp = l.cp,
                           .defer_weight_grads = l.schedule == ScheduleKind::zb_h1};
}

// ModelSpec's table bytes for the layout's micro-batch; context parallelism
// holds 1/cp of each sequence's activations.
const ActivationTableBytes& RankPlanner::tables(const ParallelLayout& l) {
  const auto key = std::make_tuple(l.tp, l.cp, l.micro_batch, l.sequence_parallel, l.recompute,
                                   l.schedule == ScheduleKind::zb_h1);
  auto it = tables_.find(key);
  if (it == tables_.end()) {
    it = tables_.emplace(key, activation_table_bytes(spec_, l.micro_batch, batch_.seq_len / l.cp, activation_options(l, precision_)))
             .first;
  }
  return it->second;
}

// The parameter units of tensor-parallel rank tp_rank, padded for a ZeRO
// group of zero_group ranks, read off ParamTables of one-layer stage plans:
// the units of a first stage (token embedding, io: wpe), a last stage (ln_f,
// and the token embedding when tied to the head, or an lm_head of its own)
// and a single one, each followed by one block. Every block of a model has
// the block's shape, and a table puts these units before its blocks
// (param_table.h), so a stage's units are its end units then its blocks.
const RankPlanner::EndUnits& RankPlanner::end_units(int tp, int tp_rank, int zero_group) {
  const auto key = std::make_tuple(tp, tp_rank, zero_group);
  auto it = units_.find(key);
  if (it != units_.end()) return it->second;
  EndUnits u;
  auto ends = [&](bool embedding, bool head) {
    StagePlan plan;
    plan.chunks.push_back(ChunkPlan{.virtual_stage = 0, .first_layer = 0, .num_layers = 1, .embedding = embedding, .head = head});
    const ParamTable table(spec_, int64_t{zero_group} * ArenaLayout::kAlignFloats, tp, tp_rank, plan);
    TERA_ASSERT(!table.units().empty() && table.units().back().layer == 0, "a one-layer stage ends with its block");
    std::vector<UnitShape> shapes = unit_shapes(table);
    u.block = shapes.back();
    shapes.pop_back();
    return shapes;
  };
  u.first = ends(true, false);
  u.last = ends(false, true);
  u.both = ends(true, true);
  return units_.emplace(key, std::move(u)).first->second;
}

RankPlan RankPlanner::plan(const ParallelLayout& layout, const ParallelLayout::Coord& coord) {
  TERA_ASSERT(layout.dp >= 1, "the rank plan needs the data-parallel degree (with_world_size)");
  TERA_ASSERT(coord.tp >= 0 && coord.tp < layout.tp && coord.pp >= 0 && coord.pp < layout.pp && coord.dp >= 0 &&
                  coord.dp < layout.dp && coord.cp >= 0 && coord.cp < layout.cp,
              "a coordinate outside the layout " + layout_string(layout));
  RankPlan r;
  r.layout = layout;
  r.coord = coord;
  r.micro_batches = micro_batches_per_step(layout, batch_.global_batch);
  auto stage = stage_plan_of(layout, spec_.config().layers, coord.pp);
  TERA_ASSERT(stage.ok(), stage.ok() ? std::string() : stage.error());  // check_layout passed
  r.stage = *stage;
  // promised_in_flight: the tests hold it equal to the built schedule's max_in_flight.
  r.slots = promised_in_flight(layout.schedule, layout.pp, static_cast<int>(r.micro_batches), layout.vpp, coord.pp);
  r.act = activation_options(layout, precision_);
  r.seq_len = batch_.seq_len / layout.cp;
  // ZeRO shards over every rank holding the same parameters, or (hybrid
  // sharding) over this rank's group of them.
  r.zero_group = layout.zero_group();
  r.zero_rank = (coord.dp * layout.cp + coord.cp) % r.zero_group;
  const EndUnits& u = end_units(layout.tp, coord.tp, r.zero_group);
  const bool emb = r.stage.has_embedding(), head = r.stage.has_head();
  r.units = emb && head ? u.both : emb ? u.first : head ? u.last : std::vector<UnitShape>{};
  UnitShape blocks = u.block;
  blocks.repeat = r.stage.num_layers();
  r.unit_count = static_cast<int64_t>(r.units.size()) + blocks.repeat;
  if (blocks.repeat > 0) r.units.push_back(blocks);
  r.zero = zero_sizes(r.units, r.zero_group, r.zero_rank, layout.zero);
  r.bytes = memory_plan_bytes(r.zero, layout.zero, r.act.dtype, r.act.gemm, tables(layout), layout.recompute, r.stage,
                              r.slots, r.unit_count);
  return r;
}

RankPlan make_rank_plan(const ModelSpec& spec, const ParallelLayout& layout, const ParallelLayout::Coord& coord,
                        const RankBatch& batch, const RankPrecision& precision) {
  RankPlanner planner(spec, batch, precision);
  return planner.plan(layout, coord);
}

RankPlan resident_rank_plan(const ModelSpec& spec, const ParamTable& table, int64_t micro_batch,
                            const ActivationOptions& act) {
  ParallelLayout l;
  l.tp = table.tp();
  l.micro_batch = static_cast<int>(micro_batch);
  l.sequence_parallel = act.sequence_parallel;
  l.recompute = act.recompute;
  const RankPrecision precision{.gemm = act.gemm,
                                .activations = act.dtype,
                                .flash_attention = spec.config().attention == AttentionKind::flash,
                                .dropout = act.dropout};
  RankPlan plan = make_rank_plan(spec, l, ParallelLayout::Coord{.tp = table.tp_rank()},
                                 RankBatch{.global_batch = micro_batch, .seq_len = spec.config().seq_len}, precision);
  const Status st = plan.check_table(table);
  TERA_ASSERT(st.is_ok(), "a resident plan is for a whole-model table: " + st.message());
  return plan;
}

MemoryPlan resident_memory_plan(const ModelSpec& spec, const ParamTable& table, int64_t micro_batch,
                                const ActivationOptions& act) {
  return resident_rank_plan(spec, table, micro_batch, act).memory_plan(spec);
}

Expected<Schedule> RankPlan::schedule() const {
  return make_schedule(layout.schedule, layout.pp, static_cast<int>(micro_batches), layout.vpp);
}

ParamTable RankPlan::param_table(const ModelSpec& spec) const {
  return ParamTable(spec, unit_align(), layout.tp, coord.tp, stage);
}

Status RankPlan::check_table(const ParamTable& table) const {
  const std::vector<UnitShape> got = fold_units(unit_shapes(table));
  if (got.size() != units.size()) {
    return Status::error(fmt::format("the parameter table has {} kinds of unit; the rank plan {}", got.size(), units.size()));
  }
  for (size_t i = 0; i < got.size(); ++i) {
    const UnitShape &a = got[i], &b = units[i];
    if (!same_shape(a, b) || a.repeat != b.repeat) {
      return Status::error(fmt::format("the parameter table's unit kind {} ({} floats x {}) differs from the rank plan's "
                                       "({} floats x {})",
                                       i, a.floats, a.repeat, b.floats, b.repeat));
    }
  }
  return ok_status();
}

MemoryPlan RankPlan::memory_plan(const ModelSpec& spec) const {
  MemoryPlanInput in;
  in.units = units;
  in.dp = zero_group;
  in.dp_rank = zero_rank;
  in.zero = layout.zero;
  in.compute = act.dtype;
  in.micro_batch = layout.micro_batch;
  in.seq_len = seq_len;
  in.act = act;
  in.stage = stage;
  in.slots = slots;
  MemoryPlan plan = plan_memory(spec, in);
  TERA_ASSERT(plan.report().bytes == bytes.bytes, "the named memory plan disagrees with the rank plan's bytes");
  return plan;
}

}  // namespace tera
