// The 3D layout: tensor (tp) x pipeline (pp) x data (dp) parallel degrees
// over the world's ranks, in Megatron's order (Narayanan et al. 2021, eq. 1)
// so that tensor-parallel groups are adjacent ranks, i.e. inside a node:
//
//     rank = (pp_rank * dp + dp_rank) * tp + tp_rank
//
// Worked example, tp = 2, pp = 2, dp = 4 (16 ranks g0..g15):
//   pp_rank 0: dp 0 -> g0 g1 | dp 1 -> g2 g3 | dp 2 -> g4 g5 | dp 3 -> g6 g7
//   pp_rank 1: dp 0 -> g8 g9 | dp 1 -> g10 g11 | dp 2 -> g12 g13 | dp 3 -> g14 g15
//   tp groups: [g0 g1] [g2 g3] ... [g14 g15]        (8 groups of 2)
//   dp groups: [g0 g2 g4 g6] [g1 g3 g5 g7] [g8 g10 g12 g14] [g9 g11 g13 g15]
//   pp groups: [g0 g8] [g1 g9] [g2 g10] ... [g7 g15]  (first and last stage:
//              the embedding group that keeps tied embeddings in sync)
#pragma once

#include <string>
#include <vector>

#include "core/status.h"

namespace tera {

struct Layout {
  int tp = 1, pp = 1, dp = 1;

  int world() const { return tp * pp * dp; }
  struct Coord {
    int tp = 0, pp = 0, dp = 0;
  };
  Coord coord(int rank) const { return {rank % tp, rank / (tp * dp), (rank / tp) % dp}; }
  int rank_of(Coord c) const { return (c.pp * dp + c.dp) * tp + c.tp; }

  // Member ranks of the groups `rank` belongs to, in group-rank order.
  std::vector<int> tp_group(int rank) const;
  std::vector<int> dp_group(int rank) const;
  std::vector<int> pp_group(int rank) const;
  // First and last pipeline stage of this (tp, dp) position; empty if the
  // rank is on neither or pp == 1.
  std::vector<int> embedding_group(int rank) const;

  std::string to_string() const;  // "tp=2 pp=2 dp=4"
};

// dp <= 0 means "derive from the world size". The message names every factor:
// "parallel.tp (2) * parallel.pp (4) * parallel.dp (3) = 24 != world size 16".
Expected<Layout> make_layout(int tp, int pp, int dp, int world_size);

}  // namespace tera
