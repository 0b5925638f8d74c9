// The parameter table of one rank: every parameter tensor this rank holds, its
// offset in the flat parameter arena and its local shape. The same offsets
// index the gradient arena and the optimizer-state arenas, so one visitor
// (for_each) drives init, zeroing, norms, bucketing and the AdamW update
// (STYLE.md principle 3).
//
// Tensors are grouped into units, the granularity of communication and of
// ZeRO-3 gathering, laid out in this order:
//   "wte"  the token embedding, alone: the first and the last pipeline stage
//          both hold it (tied to the LM head), with identical layouts, so its
//          gradient shards line up for the all-reduce that keeps them in sync;
//   "io"   the position embedding (with the embedding) and the final
//          norm (with the head);
//   "lm_head" the untied output embedding (with the head; none when tied);
//   "h.l"  one unit per block of this stage, in layer order.
// A unit is a contiguous arena range whose length is a multiple of
// `unit_align` floats, so it splits into equal, 64-byte aligned chunks across
// data-parallel ranks; its sp_partial_grad tensors come first. Under tensor
// parallelism a rank holds its shard of every split tensor (ParamInfo::
// tp_split); global_index maps each local element to the logical tensor.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "core/arena.h"
#include "model/model_spec.h"
#include "partition/stage_plan.h"

namespace tera {

struct ParamEntry {
  const ParamInfo* info;  // name, global shape, init, weight decay, tp split
  Shape local_shape;      // what this rank stores
  int64_t offset;         // floats from the arena base
  int64_t count;          // floats stored (numel(local_shape))
  int unit;
  // Row-split tensors with row groups (the fused QKV projection): per group,
  // the rows this rank holds and which share of the group they are
  // (ModelSpec::group_rows_local, group_share).
  std::vector<int64_t> group_rows, group_share;
  // Elements [replicated_begin, replicated_end) of this rank's slice are
  // replicated on other tp ranks (the key/value head when tp > kv_heads);
  // empty otherwise.
  int64_t replicated_begin = 0, replicated_end = 0;
  bool tp_split() const { return info->tp_split != TpSplit::none; }
};

struct ParamUnit {
  std::string name;        // "wte", "io", "h.3"
  int64_t begin, end;      // arena range; (end - begin) % unit_align == 0
  int first_entry, end_entry;
  int64_t sp_partial_end;  // [begin, sp_partial_end) holds the sp_partial_grad tensors
  int64_t layer = -1;      // the block's global layer ("h.<layer>"); -1 for "wte" and "io"
  int64_t size() const { return end - begin; }
};

class ParamTable {
 public:
  // unit_align: floats; a multiple of 16 (dp * 16 for ZeRO sharding over dp
  // ranks). tp, tp_rank: this rank's place in its tensor-parallel group.
  // plan: the pipeline stage's part of the model (default: all of it).
  ParamTable(const ModelSpec& spec, int64_t unit_align = ArenaLayout::kAlignFloats, int tp = 1, int tp_rank = 0,
             const StagePlan& plan = StagePlan{});
  int tp() const { return tp_; }
  int tp_rank() const { return tp_rank_; }
  // Ranks of the tp group holding each key/value head (1 unless tp >
  // kv_heads); the first of them counts the head's gradient in the norm.
  int kv_replicas() const { return kv_replicas_; }
  bool kv_replica_leader() const { return tp_rank_ % kv_replicas_ == 0; }
  const StagePlan& plan() const { return plan_; }
  // Index of local element i of e in the logical global tensor, or -1 for padding.
  int64_t global_index(const ParamEntry& e, int64_t i) const;

  const std::vector<ParamEntry>& entries() const { return entries_; }
  const std::vector<ParamUnit>& units() const { return units_; }
  int64_t total_floats() const { return total_; }
  int64_t max_unit_floats() const;
  int wte_unit() const { return wte_unit_; }  // -1 when this stage has neither embedding nor tied head
  int io_unit() const { return io_unit_; }
  int head_unit() const { return head_unit_; }  // the untied LM head's; -1 when tied or not on this stage
  // The units with buffers of their own under ZeRO-2/3 (wte, io, lm_head).
  bool dedicated(int unit) const { return unit >= 0 && (unit == wte_unit_ || unit == io_unit_ || unit == head_unit_); }
  int unit_of_layer(int64_t layer) const;     // -1 when another stage holds the layer
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
  std::vector<ParamUnit> units_;
  std::vector<int> layer_unit_;  // per global layer
  StagePlan plan_;
  int64_t total_ = 0;
  int tp_ = 1, tp_rank_ = 0, kv_replicas_ = 1;
  int wte_unit_ = -1, io_unit_ = -1, head_unit_ = -1;
};

// Writes the initial values of arena range [begin, end) to dst[0, end - begin)
// from the counter-based RNG keyed by (seed, parameter name) and the element's
// index in the logical global tensor, so every sharding sees the same
// weights. Padding (vocab rows, alignment gaps) is 0.
void init_parameters(const ParamTable& table, uint64_t seed, int64_t begin, int64_t end, float* dst);
inline void init_parameters(const ParamTable& table, float* params, uint64_t seed) {
  init_parameters(table, seed, 0, table.total_floats(), params);
}

}  // namespace tera
