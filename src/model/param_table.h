// The parameter table of one rank: every parameter tensor this rank holds, its
// offset in the flat parameter arena and its local shape. The same offsets
// index the gradient arena and the optimizer-state arenas, so one visitor
// (for_each) drives init, zeroing, norms, bucketing and the AdamW update
// (STYLE.md principle 3). For now a rank holds whole tensors (tp = 1).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "core/arena.h"
#include "model/model_spec.h"

namespace tera {

struct ParamEntry {
  const ParamInfo* info;  // name, global shape, init, weight decay
  Shape local_shape;      // what this rank stores (alloc_shape when unsharded)
  int64_t offset;         // floats from the arena base
  int64_t count;          // floats stored (numel(local_shape))
};

class ParamTable {
 public:
  explicit ParamTable(const ModelSpec& spec);

  const std::vector<ParamEntry>& entries() const { return entries_; }
  const ArenaLayout& layout() const { return layout_; }
  int64_t total_floats() const { return layout_.total_floats(); }
  // nullptr if this rank does not hold `name`.
  const ParamEntry* find(std::string_view name) const;
  const ParamEntry& at(std::string_view name) const;

  // f(const ParamEntry&) for every entry in storage order.
  template <typename F>
  void for_each(F&& f) const {
    for (const auto& e : entries_) f(e);
  }

 private:
  std::vector<ParamEntry> entries_;
  ArenaLayout layout_;
};

// Fills params (laid out by `table`) from the counter-based RNG keyed by
// (seed, parameter name) and the element's index in the logical global
// tensor, so every sharding sees the same weights. Padding rows stay 0.
void init_parameters(const ParamTable& table, float* params, uint64_t seed);

}  // namespace tera
