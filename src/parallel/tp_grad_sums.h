// Gradient sums over tensor-parallel ranks, due before the data-parallel
// reduction of a unit's gradient (not ZeRO's business: they follow from how
// tensor parallelism splits the work, whatever the ZeRO stage):
//   sequence parallelism: the unit's sp_partial_grad tensors (LayerNorm,
//     position embedding), [u.begin, u.sp_partial_end) of the arena, saw
//     only this rank's tokens: all-reduced over the tensor-parallel group;
//   replicated key/value heads (tp > kv_heads): each rank's gradient for its
//     head covers only its own query heads' share: the replicated rows are
//     all-reduced over the ranks sharing the head.
#pragma once

#include <utility>
#include <vector>

#include "comm/communicator.h"
#include "partition/param_table.h"

namespace tera {

class TpGradSums {
 public:
  // tp_dev: the tensor-parallel group's device communicator (null: none);
  // kv_dev: the group of the ranks sharing this rank's key/value head,
  // required when table.kv_replicas() > 1.
  TpGradSums(const ParamTable& table, Communicator* tp_dev, bool sequence_parallel, Communicator* kv_dev);

  // g: unit `unit`'s gradient, [u.size()] floats of device memory, summed in place.
  void sum(int unit, float* g);

 private:
  const ParamTable& table_;
  Communicator* tp_;  // device
  const bool sp_;
  Communicator* kv_;  // device; null unless key/value heads are replicated
  // Per unit: the [begin, end) ranges (floats from the unit's start) of
  // replicated key/value rows.
  std::vector<std::vector<std::pair<int64_t, int64_t>>> kv_rows_;
};

}  // namespace tera
