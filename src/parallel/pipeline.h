// Runs one pipeline stage's instruction list (parallel/schedule.h) over the
// model's chunks (model/gpt.h): forwards and backwards into activation
// slots, non-blocking sends, blocking receives matched by tag over the
// pipeline group, and at reduce_grads the data-parallel reduction plus the
// all-reduce that keeps the tied embedding of the first and last stage in
// sync. The same code runs pp = 1 (a list of forwards and backwards).
//
// Slots: micro-batch mb of chunk c lives in slot mb % slots(c); the slot
// count per chunk is the schedule's in-flight bound for that chunk
// (slots_per_chunk), so a slot is always free again when its next
// micro-batch arrives (checked).
#pragma once

#include <functional>
#include <vector>

#include "comm/groups.h"
#include "model/gpt.h"
#include "parallel/schedule.h"
#include "parallel/trace.h"
#include "parallel/zero.h"

namespace tera {

// Fills micro-batch mb (of this data-parallel rank's share of the step):
// tokens and targets [count, T]; returns count (sequences).
using MicroBatchFn = std::function<int64_t(int mb, int32_t* tokens, int32_t* targets)>;

// Activation sets each chunk of `stage` holds at once under `schedule`.
std::vector<int> slots_per_chunk(const Schedule& schedule, int stage);

class PipelineExecutor {
 public:
  // trace may be null.
  PipelineExecutor(const Schedule& schedule, Gpt& model, ZeroMemory& zero, const Groups& groups, Trace* trace);

  // One training step's instructions up to the optimizer step. dloss scales
  // the loss gradient (1 / tokens of the global batch). Returns the loss sum
  // of the micro-batches whose head runs here (0 on other stages).
  double run_step(const MicroBatchFn& batch, int64_t B, int64_t T, float dloss);
  // Forward only (evaluation) of `micro_batches` micro-batches, each through
  // every virtual stage in order. Returns each micro-batch's loss sum on the
  // stage with the head (zeros elsewhere).
  std::vector<double> run_forward(int micro_batches, const MicroBatchFn& batch, int64_t T);

  // Of the last run_step: seconds blocked waiting for pipeline receives, and the step's seconds.
  double idle_seconds() const { return idle_; }
  double step_seconds() const { return step_; }

 private:
  struct SlotState {
    int mb = -1;                   // micro-batch in the slot, -1 when free
    std::vector<Request> sends;    // outstanding sends from its buffers
  };
  SlotState& slot_state(int c, int mb);
  void wait_sends(SlotState& s);
  int tag(bool grad) const { return grad ? 2 : 1; }
  int peer_rank(int stage) const;  // pipeline-group rank of a physical stage (= the stage)
  void reduce_grads();

  const Schedule& sched_;
  Gpt& model_;
  ZeroMemory& zero_;
  const Groups& g_;
  Trace* trace_;
  int stage_;
  std::vector<std::vector<SlotState>> slots_;  // [chunk][slot]
  std::vector<int32_t> tokens_, targets_;
  double idle_ = 0, step_ = 0;
};

}  // namespace tera
