// The one memory plan (DESIGN.md invariant 2, STYLE.md principle 2): every
// buffer one rank holds, by class, with its dtype and size, as a pure
// function of the model, the rank's parameter units (its tensor-parallel
// shard of its pipeline stage), the ZeRO stage over its data-parallel group,
// the compute precision, the activation options (recompute, sequence
// parallelism, attention kind) and the micro-batches the schedule keeps in
// flight. The runtime allocates exactly this plan, one arena per class
// (model/rank_memory.h); `tera plan`'s memory column is its sum plus the
// allowances a GPU stack adds (plan/memory_model.h); the memory check
// before allocation (train/memory_check.h) reads it too.
//
// Classes and their buffers (fp32 compute; P = the stage's parameter floats
// after the tensor-parallel split, units padded to dp * 16 floats; S = this
// rank's ZeRO shard, P / dp):
//   parameters     params [P] (zero 3: [S])                        compute dtype
//                  with bf16 GEMMs (act.gemm) also compute_weights [P] bf16
//                  (zero 0-2): the weights rounded after each update
//   gradients      grads [P] (zero 0-1), grad_shard [S] (zero 1-3)  fp32
//   optimizer      adam_m, adam_v [the parameter elements this rank updates];
//                  with bf16 compute also master [P] (zero 0) or [S] (zero 1-3)
//   zero_staging   grad_staging (zero 2-3): the dedicated units (wte, io) and
//                  two block buffers, each accumulating one micro-batch's
//                  gradient until its reduce-scatter has read it
//   comm_buckets   reduce_scatter_out (zero 2-3): one reduced chunk per staging buffer
//   zero_gather    gathered_params (zero 3): the dedicated units and two blocks
//                  (the one in use and the prefetched next)              compute dtype
//                  with bf16 GEMMs also gathered_compute_weights, their bf16 copy
//   activations    per micro-batch slot of the stage (as many as the schedule
//                  keeps in flight at once, max_in_flight): the boundary
//                  buffers "slot.<name>" of every kind of chunk the stage
//                  has (ModelSpec::chunk_activations, their union by name)
//                  and the saved tables "slot.h.<name>" of its largest chunk
//                  (saved_block_activations; one copy per slot per layer);
//                  under recompute one working set "recompute.<name>". Any
//                  chunk's micro-batch may take any free slot (Megatron's
//                  bound: in-flight micro-batches x the largest chunk).
//   workspace      ModelSpec::workspace (head-only buffers on the stage with
//                  the head) and step_scalars [4 + units] f64, named by
//                  StepScalars below
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "core/arena.h"
#include "partition/memory_report.h"
#include "model/model_spec.h"
#include "partition/stage_plan.h"

namespace tera {

class ParamTable;

// The step's device f64 scalars (the workspace's "step_scalars"), by index:
// what a step accumulates on the device and copies to the host once.
struct StepScalars {
  static constexpr int64_t loss = 0;              // the loss sum the head adds to (model/gpt.h)
  static constexpr int64_t grad_norm_parts = 1;   // 2: the squared gradient norm's two parts (train/engine.h)
  static constexpr int64_t nonfinite_update = 3;  // the optimizer's non-finite count
  static constexpr int64_t nonfinite_units = 4;   // one non-finite gradient count per unit
  static constexpr int64_t count(int64_t units) { return nonfinite_units + units; }
};

// A parameter unit as ZeRO sees it (ParamTable::units): its floats and where
// its tensors' elements lie (the rest is alignment padding, which has no
// optimizer state).
struct UnitShape {
  int64_t floats = 0;                                  // a multiple of the table's unit_align
  std::vector<std::pair<int64_t, int64_t>> data;       // [begin, end) of each tensor, from the unit's start
  bool dedicated = false;                              // wte or io: its own ZeRO-2/3 staging and gather buffers
  int64_t repeat = 1;                                  // identical units in a row (a stage's blocks)
};
// Every unit of a rank's table, in order (repeat 1 each).
std::vector<UnitShape> unit_shapes(const ParamTable& table);

struct MemoryPlanInput {
  std::vector<UnitShape> units;  // the rank's parameter table
  int dp = 1, dp_rank = 0, zero = 0;
  DType compute = DType::f32;    // weights and activations: f32, or bf16 with fp32 masters
  int64_t micro_batch = 1, seq_len = 1;
  ActivationOptions act;         // act.dtype must equal compute
  StagePlan stage;               // the rank's pipeline stage
  int slots = 1;                 // micro-batch slots: the schedule's max_in_flight for the stage (>= 1)
};

class MemoryPlan {
 public:
  const ArenaLayout& arena(MemoryClass c) const { return arenas_[static_cast<size_t>(c)]; }
  int64_t bytes(MemoryClass c) const { return arena(c).total_bytes(); }
  int64_t total() const;
  MemoryReport report() const;
  ArenaLayout& mutable_arena(MemoryClass c) { return arenas_[static_cast<size_t>(c)]; }

 private:
  std::array<ArenaLayout, kMemoryClasses> arenas_;
};

MemoryPlan plan_memory(const ModelSpec& spec, const MemoryPlanInput& in);
// Floats of each ZeRO buffer of a rank (what plan_memory lays out; also what
// parallel/zero.cpp checks its views against).
struct ZeroSizes {
  int64_t params = 0;      // zero 0-2: the whole table; zero 3: this rank's shard
  int64_t grads = 0;       // zero 0-1: the whole table
  int64_t grad_shard = 0;  // zero 1-3: the reduced chunk of every unit
  int64_t staging = 0;     // zero 2-3: the dedicated units + two block buffers
  int64_t temps = 0;       // zero 2-3: a reduce-scatter output per staging buffer
  int64_t gathered = 0;    // zero 3: the dedicated units + two gathered blocks
  int64_t moments = 0;     // parameter elements (padding excluded) this rank updates
  int64_t shard = 0;       // this rank's chunks of every unit (the master shard)
};
ZeroSizes zero_sizes(const std::vector<UnitShape>& units, int dp, int dp_rank, int zero);

// The same plan in bytes per class without naming a buffer, for the
// planner's search over tens of thousands of layouts. ModelSpec's tables
// depend only on (micro-batch, sequence, activation options), so their
// bytes are computed once per combination (activation_table_bytes);
// memory_plan_bytes then costs a few multiplications. plan_memory checks
// that its arenas add up to exactly this.
struct ActivationTableBytes {
  int64_t saved_layer = 0;           // saved_block_activations, one layer, one micro-batch
  // The union of chunk_activations over a set of chunk kinds (bit 2e + h set
  // for a chunk with the embedding e and the head h), one micro-batch.
  int64_t boundary[16] = {};
  int64_t working = 0;               // the recompute working set (full: a block; selective: its scores)
  int64_t workspace_all = 0;         // workspace every stage holds
  int64_t workspace_head = 0;        // workspace only the stage with the head holds
};
ActivationTableBytes activation_table_bytes(const ModelSpec& spec, int64_t micro_batch, int64_t seq_len,
                                            const ActivationOptions& act);
// `units`: the rank's unit count (step_scalars); z: zero_sizes of its units.
// gemm: the linear layers' input dtype (ActivationOptions::gemm).
MemoryReport memory_plan_bytes(const ZeroSizes& z, int zero, DType compute, DType gemm, const ActivationTableBytes& t,
                               Recompute recompute, const StagePlan& stage, int slots, int64_t units);
// The set of chunk kinds of a stage (ActivationTableBytes::boundary's index)
// and its largest chunk's layers.
int chunk_kinds(const StagePlan& stage);
int64_t largest_chunk_layers(const StagePlan& stage);

}  // namespace tera
