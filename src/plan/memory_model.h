// Bytes per GPU for a layout, from ModelSpec's parameter, activation and
// workspace tables (DESIGN.md invariant 2; the runtime allocates from the same
// tables). Per pipeline stage: the stage's parameters after the tensor-parallel
// split; gradients, fp32 master weights and Adam moments per precision and ZeRO
// stage (Rajbhandari et al. 2020: stage 1 shards optimizer state over dp, 2
// also gradients, 3 also parameters, plus two gathered layers); activations of
// the micro-batch chunks the schedule keeps in flight; workspace;
// communication buffers; a fragmentation allowance on top; the preset's
// reserved bytes (context, NCCL). A layout fits when the worst stage fits.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "model/model_spec.h"
#include "parallel/schedule.h"
#include "plan/hardware.h"
#include "plan/layout.h"

namespace tera {

struct MemoryBreakdown {
  int stage = 0;
  double params = 0;         // working weights (16-bit under mixed precision)
  double grads = 0;
  double optimizer = 0;      // fp32 master weights + Adam moments
  double zero3_gather = 0;   // ZeRO-3: gathered layers (current + prefetched)
  double activations = 0;    // in-flight micro-batch chunks + one recompute working set
  double workspace = 0;      // backward temporaries, logits (last stage)
  double comm_buffers = 0;   // p2p, sequence-parallel gather, data-parallel bucket
  double fragmentation = 0;  // allowance: fraction of everything above
  double reserved = 0;       // context, communication library, cuBLAS workspaces
  double total() const {
    return params + grads + optimizer + zero3_gather + activations + workspace + comm_buffers + fragmentation + reserved;
  }
};

// Parameter counts on one tensor-parallel rank: one block, the token
// embedding (vocab-parallel; the tied output embedding is a copy of it),
// position embedding and final norm.
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

// Memory of one stage with `in_flight` micro-batch chunks held at once (the
// schedule's max_in_flight(stage)); stack decides dropout masks / flash.
MemoryBreakdown stage_memory(const ModelSpec& spec, const ParallelLayout& l, const Workload& w, const Cluster& cl, int stage,
                             int in_flight);
// The worst stage under the layout's schedule (in-flight counts from
// promised_in_flight, which the schedule tests hold equal to max_in_flight).
MemoryBreakdown memory_per_gpu(const ModelSpec& spec, const ParallelLayout& l, const Workload& w, const Cluster& cl);
// The same, with in-flight counts read from a built schedule.
MemoryBreakdown memory_per_gpu(const ModelSpec& spec, const ParallelLayout& l, const Workload& w, const Cluster& cl,
                               const Schedule& sch);

// Everything the memory of a stage needs that does not depend on the stage
// or on dp / zero / pp: computed once per (tp, micro-batch, sequence
// parallelism, recompute) and reused (the search prices tens of thousands of layouts).
struct LayoutTables {
  ParamSplit params;
  double saved = 0, full = 0;        // one block's saved / full activation tables (bytes)
  // A chunk's boundary buffers per in-flight micro-batch, as the runtime
  // keeps them (ModelSpec::chunk_activations): [holds the embedding][holds the head].
  double boundary[2][2] = {{0, 0}, {0, 0}};
  double ws_all = 0, ws_head = 0;    // workspace on every stage / only the last (BufferInfo::head_only)
  double act = 0;                    // one activation [B, T, C] in bytes
  int64_t layers = 0;
};
LayoutTables layout_tables(const ModelSpec& spec, const ParallelLayout& l, const Workload& w, const Cluster& cl);
MemoryBreakdown memory_per_gpu(const LayoutTables& t, const ParallelLayout& l, const Workload& w, const Cluster& cl);

ActivationOptions activation_options(const ParallelLayout& l, const Workload& w, const Cluster& cl);

}  // namespace tera
