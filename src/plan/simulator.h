// Event simulation of one training step: a second interpreter of the
// schedule's instruction lists (the executor is the first), with the
// executor's semantics (sends non-blocking, receives wait for the matching
// message) and the cost model's prices. Each stage is a clock: compute
// advances it, a receive waits for its message to arrive (send time + the
// link's queue + transfer), so pipeline fill, drain and stalls, i.e. the
// bubble, come out of the schedule itself. A zb-h1 backward is priced as B
// (StepCosts::bwd_input) and its weight_grad as W (bwd_weight): W sends and
// waits for nothing, it only occupies its stage. Gradient reduction overlaps
// the last backward (zb-h1: the last W) of each chunk except its last bucket
// (when the stack overlaps; the overlapped part still costs overlap_loss of
// itself), then the optimizer step runs.
#pragma once

#include <vector>

#include "partition/schedule.h"
#include "plan/cost_model.h"

namespace tera {

struct StageTimeline {
  PassCost busy;          // forward/backward work by class
  double wait = 0;        // idle, waiting for messages (fill, drain, stalls)
  double p2p = 0;         // blocked in its own sends (a stack without p2p overlap)
  double dp_exposed = 0;  // reduce_grads waiting for the gradient reduction
  double optimizer = 0;
  double end = 0;         // when its optimizer step finishes
};

struct SimResult {
  double step_time = 0;
  int critical_stage = 0;  // the stage that ends last
  std::vector<StageTimeline> stages;
};

struct SimOptions {
  bool dp_overlap = true;   // gradient reduction beside the last backward
  bool p2p_overlap = true;  // sends beside compute; else the sender waits for the transfer
  double overlap_loss = 0;  // see hardware.h overlapped()
};

// One instruction's interval on a stage's clock, for traces (sim_trace.h).
// Named and classed as the executor's trace spans (parallel/pipeline.cpp):
// "F3.1"/"B3.1"/"W3.1" compute, "sA3.1>2" p2p, "rG3.1<0" bubble (the wait only),
// "reduce_grads" comm, plus "optimizer_step" compute.
struct SimSpan {
  int stage;
  InstrKind kind;
  int mb, chunk, peer;
  double t0, t1;  // seconds from the start of the step
};

// With `spans` set, every instruction's interval is appended to it.
SimResult simulate_step(const Schedule& sch, const StepCosts& costs, const SimOptions& opt,
                        std::vector<SimSpan>* spans = nullptr);

// A lower bound on simulate_step's step time without running it: the
// busiest stage's work plus the first micro-batch's way to it and back, its
// unhidable reduction and optimizer step. The search uses it to skip layouts.
// split_backward: the schedule runs B and W (costs.bwd_input, bwd_weight).
double step_time_lower_bound(const StepCosts& costs, int stages, int chunks, int64_t micro_batches,
                             bool blocking_sends, bool split_backward = false);

}  // namespace tera
