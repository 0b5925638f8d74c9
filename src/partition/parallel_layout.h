// The parallel layout of a run: one pure type that the run config, the
// trainer, the planner and `tera ckpt reshard` all read. It says how the
// model and the batch are split (tensor tp x context cp x data dp x pipeline
// pp ranks, virtual chunks, micro-batch, ZeRO stage, sequence parallelism,
// recompute, the pipeline schedule and the layers of each virtual stage);
// partition/layout_check.h decides whether a layout can run a model and batch.
//
// Rank order is Megatron's (Narayanan et al. 2021, eq. 1, with context
// parallelism inside the data-parallel position), so tensor-parallel groups
// are adjacent ranks, i.e. inside a node:
//
//     rank = ((pp_rank * dp + dp_rank) * cp + cp_rank) * tp + tp_rank
//
// Worked example, tp = 2, pp = 2, dp = 4, cp = 1 (16 ranks g0..g15):
//   pp_rank 0: dp 0 -> g0 g1 | dp 1 -> g2 g3 | dp 2 -> g4 g5 | dp 3 -> g6 g7
//   pp_rank 1: dp 0 -> g8 g9 | dp 1 -> g10 g11 | dp 2 -> g12 g13 | dp 3 -> g14 g15
//   tp groups: [g0 g1] [g2 g3] ... [g14 g15]        (8 groups of 2)
//   dp groups: [g0 g2 g4 g6] [g1 g3 g5 g7] [g8 g10 g12 g14] [g9 g11 g13 g15]
//   pp groups: [g0 g8] [g1 g9] [g2 g10] ... [g7 g15]  (first and last stage:
//              the embedding group that keeps tied embeddings in sync)
//
// With context parallelism, tp = 2, cp = 2, dp = 2, pp = 1 (8 ranks):
//   dp 0: cp 0 -> g0 g1 | cp 1 -> g2 g3;   dp 1: cp 0 -> g4 g5 | cp 1 -> g6 g7
//   tp groups: [g0 g1] [g2 g3] [g4 g5] [g6 g7]
//   cp groups (the ring attention's rings): [g0 g2] [g1 g3] [g4 g6] [g5 g7]
//   dp groups: [g0 g4] [g1 g5] [g2 g6] [g3 g7]
//   ZeRO / gradient groups (dp * cp ranks holding the same parameters,
//   ordered dp * cp + cp): [g0 g2 g4 g6] [g1 g3 g5 g7]
#pragma once

#include <algorithm>
#include <cstdint>
#include <string>
#include <vector>

#include "core/recompute.h"
#include "core/status.h"
#include "partition/schedule_kind.h"

namespace tera {


struct ParallelLayout {
  int tp = 1;  // tensor-parallel degree
  int pp = 1;  // pipeline stages
  int dp = 1;  // data-parallel degree; 0: derived from the world size (with_world_size)
  int vpp = 1;           // model chunks per pipeline stage (interleaved schedule when > 1)
  int micro_batch = 1;   // sequences per micro-batch
  int zero = 0;          // ZeRO stage 0-3 over the data-parallel group
  bool sequence_parallel = false;  // shard norm/residual regions along the sequence over tp
  Recompute recompute = Recompute::none;
  ScheduleKind schedule = ScheduleKind::one_f_one_b;
  // Context parallelism: each sequence split over cp ranks
  // (partition/context_split.h; model/ring_attention.h). The data-parallel
  // reduction and ZeRO shards span dp * cp ranks.
  int cp = 1;
  // FSDP's reshard_after_forward (ZeRO-3 only): true, each block's gathered
  // parameters are freed after its forward and gathered again for its
  // backward (tera's runtime); false, they stay gathered from the forward to
  // the backward, and under pipeline parallelism (PyTorch's pipelining
  // schedules) for the whole step, with the gradients reduce-scattered once,
  // after the last micro-batch. The planner prices both; the runtime runs true.
  bool reshard_after_forward = true;
  // Hybrid sharding (PyTorch's HSDP, DeepSpeed's hpZ/MiCS, Megatron-Core's
  // partial distributed optimizer): ZeRO's states sharded over groups of
  // `shard` consecutive ranks of the dp x cp group (one node's worth, as a
  // rule) and replicated across the dp * cp / shard groups; the gradients
  // reduce-scattered in the group, then all-reduced across the replicas.
  // 0 (or dp * cp): sharded over the whole group. The planner prices it; the
  // runtime shards over the whole group.
  int shard = 0;
  // Layers of each of the pp * vpp virtual stages; empty: balanced (each
  // virtual stage L / V layers, the first L % V one more).
  std::vector<int64_t> stage_layers = {};

  int world() const { return tp * cp * dp * pp; }   // ranks (GPUs) the layout needs
  int dp_cp() const { return dp * cp; }             // ranks holding the same parameters
  // The ranks one ZeRO shard set spans (`shard` when hybrid, else dp * cp) and its replicas.
  int zero_group() const { return shard > 0 && shard < dp_cp() ? shard : dp_cp(); }
  int zero_replicas() const { return dp_cp() / std::max(1, zero_group()); }
  bool hybrid_shard() const { return zero_group() < dp_cp(); }
  int virtual_stages() const { return pp * vpp; }
  bool operator==(const ParallelLayout&) const = default;
  // The rank grid only, "tp=2 pp=2 dp=4" (layout_string has every field).
  std::string to_string() const;

  // Coordinates of a rank; fields in the order tp, pp, dp, cp.
  struct Coord {
    int tp = 0, pp = 0, dp = 0, cp = 0;
  };
  Coord coord(int rank) const {
    return {rank % tp, rank / (tp * cp * dp), (rank / (tp * cp)) % dp, (rank / tp) % cp};
  }
  int rank_of(Coord c) const { return ((c.pp * dp + c.dp) * cp + c.cp) * tp + c.tp; }

  // Member ranks of the groups `rank` belongs to, in group-rank order.
  std::vector<int> tp_group(int rank) const;
  std::vector<int> dp_group(int rank) const;  // same tp, cp and pp position
  std::vector<int> pp_group(int rank) const;
  // First and last pipeline stage of this (tp, dp, cp) position; empty if the
  // rank is on neither or pp == 1.
  std::vector<int> embedding_group(int rank) const;
};

// dp = 0 becomes world / (tp * cp * pp); call after check_layout passed.
ParallelLayout with_world_size(ParallelLayout l, int world);

// "tp=8,pp=4,dp=2,vpp=2,mb=1,zero=1,sp=1,recompute=selective,schedule=interleaved"
// (cp=N when cp > 1, reshard=0 when reshard_after_forward is off, shard=N
// when hybrid, stage_layers=3/2/2/1 when given).
std::string layout_string(const ParallelLayout& l);
// Parses the same keys in any order; absent keys keep their defaults, dp may
// be left out when gpus > 0 (dp = gpus / (tp * cp * pp)); the schedule follows
// vpp unless given. Messages name the key and the fix. Whether the layout
// fits a model is check_layout's (partition/layout_check.h).
Expected<ParallelLayout> parse_layout(const std::string& text, int gpus);

}  // namespace tera
