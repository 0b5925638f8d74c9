// The rank plan: everything one rank of a run holds, as one pure function of
// the model, the parallel layout, the rank's coordinate, the batch and the
// precision, before anything is built. The three readers call it and nothing
// else decides these things:
//   the engine (train/engine.h)        builds the schedule, the parameter
//                                      table and the memory from it; ZeroMemory
//                                      and the model (Gpt) bind from it;
//   the memory check (train/memory_check.h) sums it before any allocation;
//   the planner (plan/memory_model.h)  prices it, plus a GPU stack's allowances.
//
// What it says, for rank coord of layout:
//   micro_batches   per data-parallel rank per step (the schedule's m)
//   stage           its pipeline stage's chunks (stage_plan.h)
//   slots           the micro-batches the schedule keeps in flight on the stage
//   act             how activations are kept (tp, sp, recompute, dtypes, attention)
//   units           its parameter units (ParamTable's, blocks folded by repeat),
//                   padded for the ZeRO group of zero_group ranks
//   zero            the ZeRO buffers' floats (memory_plan.h ZeroSizes)
//   bytes           its memory plan in bytes per class (memory_plan.h)
// and, built on demand from the same fields, the pipeline schedule, the
// parameter table and the named memory plan the runtime allocates.
//
// Worked example: GPT-2 small (12 layers) with tp 2, pp 2, dp 2, ZeRO 1,
// global batch 8, micro-batch 2: rank 5 is coord {tp 1, pp 1, dp 0}; it runs
// m = 8 / (2 * 2) = 2 micro-batches per step, holds layers 6-11 and the head
// (ln_f, the tied wte copy), units "wte", "io", h.6-h.11 padded to 2 * 16
// floats, keeps at most 1 micro-batch in flight under 1F1B (the last stage),
// and shards its gradients and Adam moments over its 2-rank ZeRO group.
//
// Pure: no backend, no MPI (DESIGN.md invariant 2). The RankPlanner memoizes
// what depends on few keys (the activation tables, the one-layer units), so
// the layout search prices tens of thousands of layouts through this same
// code.
#pragma once

#include <cstdint>
#include <map>
#include <tuple>
#include <utility>
#include <vector>

#include "core/status.h"
#include "model/model_spec.h"
#include "partition/context_split.h"
#include "partition/memory_plan.h"
#include "partition/parallel_layout.h"
#include "partition/param_table.h"
#include "partition/schedule.h"
#include "partition/stage_plan.h"

namespace tera {

// The batch a rank plans for: sequences per optimizer step over every
// data-parallel rank, and their length (each context-parallel rank holds
// seq_len / cp of every sequence). The micro-batch is the layout's.
struct RankBatch {
  int64_t global_batch = 1;
  int64_t seq_len = 1;
};

// The dtypes a rank keeps and what its activation tables hold beyond the
// layout. tera's runtime: the config's (train/rank_plan.h rank_precision);
// the planner: a GPU stack's (plan/memory_model.h).
struct RankPrecision {
  DType gemm = DType::f32;         // the linear layers' inputs: f32, or bf16 (tera's bf16)
  DType activations = DType::f32;  // weights and kept activations: f32 (tera), bf16 (all-16-bit GPU stacks)
  bool flash_attention = true;     // no saved score matrix (the runtime: model.attention = "flash")
  bool dropout = false;            // dropout masks kept (GPU stacks with dropout; tera has none)
};

struct RankPlan {
  ParallelLayout layout;            // dp set (with_world_size)
  ParallelLayout::Coord coord;
  int64_t micro_batches = 1;        // per data-parallel rank per step
  int slots = 1;                    // schedule's most micro-batches in flight on this stage (>= 1)
  StagePlan stage;
  ActivationOptions act;
  int64_t seq_len = 1;              // tokens of each sequence on this rank (seq_len / cp)
  int zero_group = 1, zero_rank = 0;  // the ranks sharing this rank's parameters (dp * cp) and its index
  std::vector<UnitShape> units;     // parameter units in table order, blocks folded (UnitShape::repeat)
  int64_t unit_count = 0;           // units with every repeat counted
  ZeroSizes zero;
  MemoryReport bytes;               // the memory plan, per class

  // This rank's tokens of each sequence (seq_len of them: its cp chunks).
  ContextSplit context_split() const { return {layout.cp, coord.cp, seq_len * layout.cp}; }
  // Floats every parameter unit is padded to (ParamTable's unit_align).
  int64_t unit_align() const { return int64_t{zero_group} * ArenaLayout::kAlignFloats; }
  // The pipeline schedule the stage runs (its max_in_flight(coord.pp) is slots).
  Expected<Schedule> schedule() const;
  // The parameter table of this rank (its tp shard of its stage), whose
  // units fold to `units` (check_table).
  ParamTable param_table(const ModelSpec& spec) const;
  // Whether table's units are this plan's; the error names the first that differs.
  Status check_table(const ParamTable& table) const;
  // The named buffers the runtime allocates, one arena per class; its bytes
  // are `bytes`.
  MemoryPlan memory_plan(const ModelSpec& spec) const;
};

// The stage plan of pipeline stage `stage` of layout l for a model of
// `layers` layers (balanced, or l.stage_layers): what the plan of any rank
// of that stage holds, also for addressing another stage's parameters.
Expected<StagePlan> stage_plan_of(const ParallelLayout& l, int64_t layers, int stage);

// How a rank of layout l keeps its activations at a precision.
ActivationOptions activation_options(const ParallelLayout& l, const RankPrecision& precision);

// Consecutive equal units merged into one with their count in repeat.
std::vector<UnitShape> fold_units(const std::vector<UnitShape>& units);

// Plans ranks of one model, batch and precision, remembering what many
// layouts share. The spec must outlive it.
class RankPlanner {
 public:
  RankPlanner(const ModelSpec& spec, const RankBatch& batch, const RankPrecision& precision)
      : spec_(spec), batch_(batch), precision_(precision) {}
  // layout must pass check_layout for the spec and batch (asserted where
  // that matters: stage layers, the schedule); dp must be set.
  RankPlan plan(const ParallelLayout& layout, const ParallelLayout::Coord& coord);
  const ModelSpec& spec() const { return spec_; }
  const RankBatch& batch() const { return batch_; }
  const RankPrecision& precision() const { return precision_; }

 private:
  struct EndUnits {
    // The units a stage holds besides its blocks, for a first stage, a last
    // stage and a single one (token embedding, io, an untied lm_head), and
    // the block unit.
    std::vector<UnitShape> first, last, both;
    UnitShape block;
  };
  const ActivationTableBytes& tables(const ParallelLayout& layout);
  const EndUnits& end_units(int tp, int tp_rank, int zero_group);
  const ModelSpec& spec_;
  RankBatch batch_;
  RankPrecision precision_;
  std::map<std::tuple<int, int, int, bool, Recompute, bool>, ActivationTableBytes> tables_;  // the last: zb-h1
  std::map<std::tuple<int, int, int>, EndUnits> units_;
};

// The plan of a rank that keeps every parameter of `table` resident: one
// pipeline stage (the table's whole model), dp 1, ZeRO 0, one micro-batch
// slot of up to micro_batch whole sequences, with the table's tensor
// parallelism and act's sequence parallelism, recompute and dtypes (the
// attention is the model's). The one-process model and unit tests.
RankPlan resident_rank_plan(const ModelSpec& spec, const ParamTable& table, int64_t micro_batch,
                            const ActivationOptions& act = {});
// Its named memory plan.
MemoryPlan resident_memory_plan(const ModelSpec& spec, const ParamTable& table, int64_t micro_batch,
                                const ActivationOptions& act = {});

// One rank's plan (a RankPlanner used once).
RankPlan make_rank_plan(const ModelSpec& spec, const ParallelLayout& layout, const ParallelLayout::Coord& coord,
                        const RankBatch& batch, const RankPrecision& precision);

}  // namespace tera
