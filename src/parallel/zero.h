// Data parallelism with ZeRO stages 0-3 (Rajbhandari et al. 2020) as a
// ParamMemory: the model asks for each unit's parameters and gradients and
// reports when a unit's gradient is complete; this class decides where they
// live and overlaps communication with the rest of backward.
//
//   zero 0  params, grads, Adam state replicated; each unit's gradient is
//           all-reduced (non-blocking) as soon as the last micro-batch's
//           backward finishes it.
//   zero 1  Adam state sharded: grads reduce-scattered per unit, each rank
//           updates its chunk, parameters all-gathered back.
//   zero 2  as 1, and gradients too: a unit's gradient lives in a staging
//           buffer only until its per-micro-batch reduce-scatter completes;
//           each rank accumulates just its chunk.
//   zero 3  (FSDP) parameters sharded too: each block's unit is all-gathered
//           just before its forward and again before its backward (the next
//           one prefetched), and freed after; the embedding units (wte, io),
//           used at both ends of every micro-batch, are gathered once per step.
// Unit u (ParamTable::units) of P floats splits into dp chunks of P/dp; rank
// r owns chunk r of every unit. Grad reduction is a SUM: every rank scales its
// loss by 1 / (global batch tokens), so the sum is the mean-loss gradient.
// The optimizer is not ZeroMemory's: it exposes the shards this rank updates
// (shards()) and the caller (train/engine.h) runs AdamW over them, then calls
// shards_updated().
// Files: zero.cpp (buffers, initial values, updates), zero_gather.cpp
// (parameter gathers), zero_grads.cpp (gradient reductions); the
// tensor-parallel sums before a reduction are tp_grad_sums.h's.
// Memory: every buffer is the rank's memory plan's (partition/memory_plan.h:
// params, grads, grad_shard, grad_staging, reduce_scatter_out,
// gathered_params), device memory of the backend. Tensors move over the
// data-parallel group's device communicator; host arrays (checkpoint
// gathers, moments) over its host communicator.
#pragma once

#include <deque>
#include <vector>

#include "comm/communicator.h"
#include "kernels/backend.h"
#include "model/param_memory.h"
#include "model/rank_memory.h"
#include "parallel/tp_grad_sums.h"
#include "partition/memory_plan.h"
#include "partition/rank_plan.h"

namespace tera {

class ZeroMemory final : public ParamMemory {
 public:
  // Bound from the rank plan (partition/rank_plan.h): its ZeRO stage, its
  // ZeRO buffer sizes and its sequence parallelism. `table` is the plan's
  // param_table (units padded to dp.size() * 16 floats); `memory` is
  // allocated from the plan's memory_plan. dp_host and dp_dev are the
  // data-parallel group's two communicators (the plan's ZeRO group). With
  // sequence parallelism, `tp_dev` is the tensor-parallel group over which
  // each unit's sp_partial_grad prefix is summed before the dp reduction.
  // With key/value heads replicated over tp ranks (table.kv_replicas() > 1),
  // `kv_dev` is the group of the ranks sharing this rank's head: their
  // gradients for it are summed there, also before the dp reduction.
  ZeroMemory(const ParamTable& table, const RankPlan& plan, Communicator& dp_host, Communicator& dp_dev,
             const Backend& be, RankMemory& memory, Communicator* tp_dev = nullptr, Communicator* kv_dev = nullptr);
  ~ZeroMemory() override;

  // ParamMemory
  const float* acquire(int unit, Pass pass) override;
  void release(int unit, Pass pass) override;
  // bf16 GEMMs: zero 0-2 keep a bf16 copy of params, remade when they
  // change (shards_updated, init, load); zero 3 rounds each gathered unit
  // into the twin of its gather buffer on first use after the gather.
  const uint16_t* compute_weights(int unit) override;
  float* grads(int unit) override;
  void grads_done(int unit) override;
  void poll() override;

  // Initial parameters: every rank fills what it stores (layout-invariant),
  // generated on the host a unit at a time and copied to the device.
  void init_parameters(uint64_t seed);
  // Step protocol: begin_step, then per micro-batch set_last_micro_batch +
  // forward_backward, then finish_gradients, grad_norm_squared, the caller's
  // optimizer over shards(), shards_updated.
  void begin_step();
  void set_last_micro_batch(bool last) { last_micro_batch_ = last; }
  void finish_gradients();
  // Squared norm of the reduced gradient this rank holds, over its
  // parameters, into out[0] (tensors split across tp ranks: to be summed over
  // the tp group) and out[1] (replicated ones, identical on every tp rank):
  // out is device memory. Under zero >= 1 each dp rank holds a chunk, so the
  // caller sums the two parts over the dp group (grads_sharded()).
  // skip_unit: a unit not to count (the tied embedding's copy on the last
  // pipeline stage, counted on the first).
  void grad_sum_squares(double* out, int skip_unit = -1);
  bool grads_sharded() const { return zero_ >= 1; }
  // out[u] (device) = non-finite values in unit u's reduced gradient this rank holds.
  void count_nonfinite_grads(double* out);
  // The reduced gradient of `unit` this rank holds after finish_gradients
  // (device memory): the whole unit (zero 0) or this rank's chunk (zero >= 1).
  float* reduced_grads(int unit, int64_t* count);

  // A contiguous range [begin, end) of the table (arena offsets) that this
  // rank updates, with where its parameters and its reduced gradient live
  // (param[0 .. end-begin), grad[0 .. end-begin)). zero 0: one shard, the
  // whole table; zero >= 1: this rank's chunk of every unit, in unit order.
  struct Shard {
    int64_t begin, end;
    float* param;
    float* grad;
    // ZeRO-0 with bf16 GEMMs: the bf16 copy of param, which the optimizer
    // writes in its update (shards_updated then casts nothing); else null.
    uint16_t* compute = nullptr;
  };
  // Valid after finish_gradients; the ranges are update_ranges().
  std::vector<Shard> shards();
  const std::vector<std::pair<int64_t, int64_t>>& update_ranges() const { return ranges_; }
  // After the caller wrote new parameters into shards() (and, at ZeRO-0, each
  // shard's compute copy where it is non-null: the optimizer's update does):
  // zero 1/2 all-gather every unit back in place and remake the bf16 copy;
  // gathered copies (zero 3) are stale from here on.
  void shards_updated();
  // `full` (host memory) is in the table's layout with this rank's
  // update_ranges() filled (an optimizer moment, say): collective over dp for
  // the sharded stages, every unit's chunks are all-gathered into it in place
  // over the host communicator (zero 0: nothing to do).
  void all_gather_ranges(float* full);

  // Full parameters (checkpoints), copied to / from host arrays in the
  // table's layout: collective under zero 3.
  void gather_parameters(float* out);
  void load_parameters(const float* full);

  int stage() const { return zero_; }

 private:
  struct Pending {
    int unit;
    Request req;
    float* staging;  // zero 2/3: send buffer to return to the pool
    float* temp;     // zero 2/3: received chunk to add into the accumulator
  };
  struct Gather {
    int unit = -1;
    Request req;
    float* buf = nullptr;
    bool in_use = false;
    bool rounded = false;  // bf16 GEMMs: its twin holds this gather's bf16 copy
  };
  void refresh_compute_weights();  // zero 0-2: compute_ from params_
  void carve_pools(int64_t pool);  // zero 2/3: staging and gather buffers, `pool` block buffers each
  bool dedicated(int unit) const { return table_.dedicated(unit); }
  int64_t chunk(int unit) const { return table_.units()[static_cast<size_t>(unit)].size() / dp_.size(); }
  int64_t chunk_begin(int unit) const {
    return table_.units()[static_cast<size_t>(unit)].begin + dp_.rank() * chunk(unit);
  }
  float* shard_ptr(float* shard_base, int unit) const { return shard_base + shard_offset_[static_cast<size_t>(unit)]; }
  void complete(Pending& p);
  void complete_oldest();
  float* take_staging(int unit);
  Gather& gather_slot(int unit);
  void start_gather(int unit, Gather& g);
  void prefetch(int unit);

  const ParamTable& table_;
  Communicator& dp_host_;
  Communicator& dp_;  // the device communicator: every tensor collective
  TpGradSums tp_sums_;  // before each unit's data-parallel reduction
  const int zero_;
  const Backend& be_;
  std::vector<int64_t> shard_offset_;  // per unit, into shard arrays (sum of chunks before it)
  int64_t shard_floats_ = 0;
  int64_t max_block_ = 0, max_chunk_ = 0;  // largest block unit, largest chunk (floats)
  float* temp_for(const float* staging) const;
  bool last_micro_batch_ = true;

  // Device buffers of the memory plan (null where the stage has none).
  float* params_ = nullptr;      // zero 0-2: full; zero 3: this rank's shard
  float* grads_ = nullptr;       // zero 0-1: full
  float* grad_shard_ = nullptr;  // zero 1-3: reduced chunk (zero 2/3 accumulate over micro-batches)
  float* staging_ = nullptr;     // zero 2/3: root staging + 2 block staging buffers
  float* temps_ = nullptr;       // zero 2/3: reduce-scatter outputs, one per staging buffer
  float* gathered_ = nullptr;    // zero 3: root + 2 block gather buffers
  uint16_t* compute_ = nullptr;           // bf16 GEMMs, zero 0-2: the bf16 copy of params_
  uint16_t* gathered_compute_ = nullptr;  // bf16 GEMMs, zero 3: the bf16 twin of gathered_
  ZeroSizes sizes_;
  std::vector<float*> free_staging_;         // zero 2/3: block staging buffers not in use
  std::vector<float*> staging_of_unit_;      // zero 2/3: the buffer a unit accumulates into now
  std::vector<float*> dedicated_staging_;    // zero 2/3: per unit, its own buffer (wte, io) or null
  std::vector<float*> temp_of_staging_;      // zero 2/3: parallel to the staging buffers, by index
  std::vector<float*> staging_buffers_;      // zero 2/3: every staging buffer, by index
  std::deque<Pending> pending_;
  std::vector<Gather> dedicated_gather_;     // zero 3: per unit, wte and io only
  Gather block_gathers_[2];
  int first_block_unit_ = 0;
  std::vector<std::pair<int64_t, int64_t>> ranges_;  // update_ranges()
};

}  // namespace tera
