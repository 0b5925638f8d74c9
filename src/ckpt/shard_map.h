// Global <-> local for the parameters of one rank's table
// (partition/param_table.h): the one copy between a logical tensor and a rank's
// slice of it, used by checkpoint reads, engine loads, the engine's gather
// of global tensors and `ckpt reshard`.
//
//   global: [numel(e.info->shape)]  the logical tensor, row-major
//   local:  [e.count]               the entry's slice in storage order,
//                                   padding (vocab rows past the vocab) included
// A tensor whole on this rank (tp = 1, or not split) is stored as the
// global tensor in order, then padding; a split one maps element by element
// through ParamTable::global_index (-1: padding).
#pragma once

#include <cstdint>

#include "partition/param_table.h"

namespace tera {

class ShardMap {
 public:
  explicit ShardMap(const ParamTable& table) : table_(table) {}

  // Whether e's local slice is the global tensor in order, then padding.
  bool whole(const ParamEntry& e) const { return table_.tp() == 1 || e.info->tp_split == TpSplit::none; }
  // local[i] = global[g(i)], 0 where i is padding.
  void scatter(const ParamEntry& e, const float* global, float* local) const;
  // global[g(i)] = local[i] for every i that is not padding; covered[g(i)] =
  // 1 too when covered is given ([numel(shape)] bytes). local need not be
  // float-aligned (a tensor in a mapped file).
  void gather(const ParamEntry& e, const void* local, float* global, uint8_t* covered = nullptr) const;

  const ParamTable& table() const { return table_; }

 private:
  const ParamTable& table_;
};

}  // namespace tera
