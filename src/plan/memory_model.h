// Bytes per GPU for a layout: the runtime's own memory plan
// (model/memory_plan.h: every buffer tera allocates on a rank, by class) plus
// the allowances a real GPU stack adds on top, each on its own line (DESIGN.md
// invariant 2; tests/plan/test_memory_plan_equality.cpp holds the plan's
// bytes equal to what the runtime allocates, per rank and class):
//   allocator   the caching allocator's fragmentation: a fraction of the plan
//               (memory.fragmentation in the cluster preset);
//   reserved    framework and communication library: CUDA/HIP context,
//               NCCL/RCCL buffers, cuBLAS/hipBLAS workspaces (memory.reserved_bytes).
// The rank reported for a stage is its tensor-parallel rank 0 (every tp rank
// holds the same shapes) and data-parallel rank 0 (whose ZeRO chunks hold the
// most parameters: padding sits at the end of each unit). A layout fits when
// the fullest stage fits. Precision mixed prices tera's bf16 runtime: bf16
// weights and activations, fp32 gradients, fp32 master weights sharded with
// the optimizer state (memory_plan.h).
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <tuple>
#include <vector>

#include "model/memory_plan.h"
#include "model/model_spec.h"
#include "parallel/schedule.h"
#include "plan/hardware.h"
#include "plan/layout.h"

namespace tera {

struct MemoryBreakdown {
  int stage = 0;
  MemoryReport plan;      // the runtime's buffers on this GPU, by class
  double allocator = 0;   // allowance: allocator fragmentation
  double reserved = 0;    // allowance: framework + NCCL/RCCL + library workspaces
  double model() const { return static_cast<double>(plan.total()); }
  double total() const { return model() + allocator + reserved; }
  // Parameters, gradients and optimizer state with their ZeRO buffers: what
  // data parallelism shards.
  double states() const;
};

// Parameter counts on one tensor-parallel rank: one block, the token
// embedding (vocab-parallel; the tied output embedding is a copy of it),
// position embedding and final norm (for the cost model's optimizer and
// communication volumes).
struct ParamSplit {
  double block = 0, wte = 0, wpe = 0, lnf = 0;
  // Untied output embedding (Llama): the last stage holds its own [V/tp, C]
  // head beside the input embedding, and no tied gradient crosses the pipeline.
  bool untied = false;
};
ParamSplit param_split(const ModelSpec& spec, int tp);
// Parameters one GPU of pipeline stage `stage` holds (after the tensor-parallel
// split, before ZeRO): its layers, plus the embeddings on the first stage and
// the final norm and tied output embedding on the last.
double stage_params(const ParamSplit& p, const ParallelLayout& l, int64_t layers, int stage);
int64_t stage_params(const ModelSpec& spec, const ParallelLayout& l, int stage);

ActivationOptions activation_options(const ParallelLayout& l, const Workload& w, const Cluster& cl);

// What a memory figure needs beyond the layout, computed once and reused
// (the search prices tens of thousands of layouts): ModelSpec's table bytes
// per (tp, cp, micro-batch, sp, recompute), the parameter units per
// (tp, ZeRO group size).
class MemoryTables {
 public:
  MemoryTables(const ModelSpec& spec, const Workload& w, const Cluster& cl) : spec_(spec), w_(w), cl_(cl) {}
  // The memory plan's bytes of rank (stage, dp_rank) of l (tp rank 0).
  MemoryReport rank_plan(const ParallelLayout& l, int stage, int dp_rank = 0);
  // The fullest stage, with the allowances.
  MemoryBreakdown per_gpu(const ParallelLayout& l);
  MemoryBreakdown with_allowances(const MemoryReport& plan, int stage) const;

 private:
  struct Units {
    // The units a stage holds besides its blocks, for a first stage, a last
    // stage and a single one (token embedding, io, an untied lm_head).
    std::vector<UnitShape> first, last, both;
    UnitShape block;
  };
  const ActivationTableBytes& tables(const ParallelLayout& l);
  const Units& units(int tp, int dp);
  const ModelSpec& spec_;
  Workload w_;
  Cluster cl_;
  std::map<std::tuple<int, int, int, bool, Recompute>, ActivationTableBytes> tables_;
  std::map<std::pair<int, int>, Units> units_;
};

// One-off forms of MemoryTables.
MemoryBreakdown memory_per_gpu(const ModelSpec& spec, const ParallelLayout& l, const Workload& w, const Cluster& cl);
MemoryBreakdown stage_memory(const ModelSpec& spec, const ParallelLayout& l, const Workload& w, const Cluster& cl,
                             int stage);

}  // namespace tera
