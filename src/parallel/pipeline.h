// Runs one pipeline stage's instruction list (partition/schedule.h) over the
// model's chunks (model/gpt.h): forwards and backwards into activation
// slots, non-blocking sends, blocking receives matched by tag over the
// pipeline group's device communicator, and at reduce_grads the
// data-parallel reduction plus the all-reduce that keeps the tied embedding
// of the first and last stage in sync. Token ids stay host arrays (the
// model copies them in). The same code runs pp = 1 (a list of forwards and backwards).
//
// Slots: the model holds as many micro-batch slots as the schedule keeps
// micro-batches in flight on this stage (Schedule::max_in_flight), each fit
// for any of the stage's chunks. A micro-batch takes a free slot when its
// activation arrives (or at its forward, on the embedding's chunk) and frees
// it once its input gradient is sent (at its backward, on the first virtual
// stage); under zb-h1 at its weight_grad (W), which still reads it. A slot
// is reused only after its sends completed. Free slots are
// taken oldest first, preferring one whose sends are already done.
//
// Why waiting on a slot's sends cannot deadlock (a send of a large message
// completes only once its receive is posted): a micro-batch's output
// gradient is received into its slot's grad_in, posted at its forward (one
// tag per pipeline edge, so the posted receives of an edge match its sends
// in micro-batch order, as both run in that order). So a gradient send
// always finds its receive posted; and an activation send was received
// before the gradient that frees its slot came back. Every wait on a send
// therefore ends without the peer doing anything more.
#pragma once

#include <deque>
#include <functional>
#include <string>
#include <vector>

#include "comm/groups.h"
#include "model/gpt.h"
#include "partition/schedule.h"
#include "parallel/trace.h"
#include "parallel/zero.h"

namespace tera {

// Fills micro-batch mb (of this data-parallel rank's share of the step):
// tokens and targets [count, T]; returns count (sequences).
using MicroBatchFn = std::function<int64_t(int mb, int32_t* tokens, int32_t* targets)>;

class PipelineExecutor {
 public:
  // trace may be null.
  PipelineExecutor(const Schedule& schedule, Gpt& model, ZeroMemory& zero, const Groups& groups, Trace* trace);

  // One training step's instructions up to the optimizer step. dloss scales
  // the loss gradient (1 / tokens of the global batch). The loss sum of the
  // micro-batches whose head runs here is added to the model's
  // step_scalars()[StepScalars::loss] (partition/memory_plan.h; on the device).
  void run_step(const MicroBatchFn& batch, int64_t B, int64_t T, float dloss);
  // Forward only (evaluation) of `micro_batches` micro-batches, each through
  // every virtual stage in order. On the stage with the head, the loss sums
  // of the micro-batches for which counted(mb) is true are added to
  // step_scalars()[StepScalars::loss].
  void run_forward(int micro_batches, const MicroBatchFn& batch, int64_t T, const std::function<bool(int mb)>& counted);

  // Of the last run_step: seconds blocked waiting for pipeline receives, and the step's seconds.
  double idle_seconds() const { return idle_; }
  double step_seconds() const { return step_; }

  // The route (sender, receiver, tag; pipeline-group ranks) of the message a
  // send_* or recv_* instruction of `stage` carries: activations under one
  // tag, gradients under one tag per pipeline edge.
  static P2pRoute message_route(const Schedule& schedule, int stage, const Instr& in);
  // Every route the executors of all stages use, training (every send of the
  // schedule) and evaluation (run_forward: one tag, each virtual stage to the
  // next), in one order on every rank: what the constructor opens on the
  // pipeline group's device communicator (Communicator::open_routes).
  static std::vector<P2pRoute> routes(const Schedule& schedule);

 private:
  struct SlotState {
    int mb = -1, chunk = -1;       // micro-batch in the slot (mb -1 when free)
    std::vector<Request> sends;    // outstanding sends from its buffers
    Request grad_recv;             // its output gradient's receive, posted at the forward
  };
  int take_slot(int c, int mb);
  void free_slot(int c, int mb);
  int& slot_of(int c, int mb);
  void wait_sends(SlotState& s);
  static constexpr int kActTag = 1;
  static constexpr int kEvalTag = 3;
  // Gradients over pipeline edge e (virtual stages e and e + 1).
  static int grad_tag(int edge) { return 16 + edge; }
  int peer_rank(int stage) const;  // pipeline-group rank of a physical stage (= the stage)
  void reduce_grads();
  // run_step's instructions, one kind each; they return the span's name for the trace.
  std::string run_forward_instr(const Instr& in, const MicroBatchFn& batch, int64_t B, int64_t T, float dloss,
                                int64_t bytes);
  std::string run_backward_instr(const Instr& in, int64_t B, int64_t T, std::vector<int>& backwards_done);
  std::string run_weight_grad_instr(const Instr& in, int64_t B, int64_t T, std::vector<int>& weight_grads_done);
  // zb-h1: a micro-batch's slot is held until its weight_grad, not its backward.
  bool split() const { return splits_backward(sched_.kind); }
  std::string run_send_instr(const Instr& in, int64_t bytes);
  std::string run_recv_instr(const Instr& in, int64_t bytes, double t0);

  const Schedule& sched_;
  Gpt& model_;
  ZeroMemory& zero_;
  const Groups& g_;
  Trace* trace_;
  int stage_;
  std::vector<SlotState> slots_;               // [slot]
  std::deque<int> free_;                       // free slots, released oldest first
  std::vector<std::vector<int>> slot_of_;      // [chunk][mb]: the slot, -1 when none
  std::vector<int32_t> tokens_, targets_;
  double idle_ = 0, step_ = 0;
};

}  // namespace tera
