// A rank's stage plan and memory plan from the run config.
#include "train/rank_plan.h"

#include "core/check.h"
#include "model/layout_check.h"
#include "model/param_table.h"
#include "parallel/schedule.h"

namespace tera {

Expected<StagePlan> stage_plan_for(const RunConfig& cfg, int stage) {
  auto per = layers_per_virtual_stage(cfg.model.layers, cfg.parallel.pp, cfg.parallel.vpp, cfg.parallel.stage_layers);
  if (!per) return per.status();
  return make_stage_plan(*per, cfg.parallel.pp, stage);
}

MemoryPlan rank_memory_plan(const RunConfig& cfg, const ParallelLayout& layout, const ParallelLayout::Coord& coord) {
  const ModelSpec spec(cfg.model);
  auto plan = stage_plan_for(cfg, coord.pp);
  TERA_ASSERT(plan.ok(), plan.ok() ? std::string() : plan.error());
  const int64_t micro = micro_batches_per_step(layout, cfg.train.global_batch);
  auto sched = make_schedule(cfg.parallel.schedule, layout.pp, static_cast<int>(micro), cfg.parallel.vpp);
  TERA_ASSERT(sched.ok(), sched.ok() ? std::string() : sched.error());
  const ParamTable table(spec, int64_t{layout.dp} * ArenaLayout::kAlignFloats, layout.tp, coord.tp, *plan);
  MemoryPlanInput in;
  in.units = unit_shapes(table);
  in.dp = layout.dp;
  in.dp_rank = coord.dp;
  in.zero = cfg.parallel.zero;
  in.compute = DType::f32;
  in.micro_batch = cfg.parallel.micro_batch;
  in.seq_len = cfg.model.seq_len;
  in.act = ActivationOptions{.tp = layout.tp,
                             .sequence_parallel = cfg.parallel.sequence_parallel,  // as the model takes it (tp_comm.h)
                             .recompute = cfg.parallel.recompute,
                             .flash_attention = cfg.model.attention == AttentionKind::flash,
                             .gemm = cfg.train.precision};
  in.stage = *plan;
  in.slots = sched->max_in_flight(coord.pp);
  return plan_memory(spec, in);
}

}  // namespace tera
