// Pipeline schedules as data (DESIGN.md invariant 3): a pure function
// (kind, stages, micro-batches, chunks) -> per-stage instruction lists that
// the executor runs and the planner's simulator prices. Invariant: model chunk
// c of physical stage s is virtual stage v = c*stages + s; activations flow
// v -> v+1 and gradients v+1 -> v, and every list ends reduce_grads, optimizer_step.
// In a zb-h1 list `backward` is the input gradient only (B: what the gradient
// message carries) and each micro-batch has one weight_grad (W) after it on
// the same stage; in every other list `backward` is B and W fused.
#pragma once

#include <string>
#include <vector>

#include "partition/schedule_kind.h"
#include "core/status.h"

namespace tera {

enum class InstrKind {
  forward,
  backward,  // zb-h1: the input gradient (B); else the whole backward
  send_act,
  recv_act,
  send_grad,
  recv_grad,
  reduce_grads,
  optimizer_step,
  weight_grad,  // zb-h1 only: the weight gradient (W) of a micro-batch whose B ran; no message
};

// One step of a stage. mb and chunk name the local computation the
// instruction belongs to (for send/recv: the local forward or backward that
// produces or consumes the message); peer is the physical stage at the other
// end of a send/recv, -1 otherwise.
struct Instr {
  InstrKind kind;
  int mb;
  int chunk;
  int peer;
  bool operator==(const Instr&) const = default;
};

// Executor semantics the lists are built for: sends are non-blocking
// (buffered until matched), receives block until the matching send was
// issued, and messages between a pair of stages are matched in issue order
// per (direction, kind).
struct Schedule {
  ScheduleKind kind;
  int stages;
  int micro_batches;
  int chunks;
  std::vector<std::vector<Instr>> per_stage;  // [stages][instructions], in execution order

  int virtual_stages() const { return stages * chunks; }
  int virtual_stage(int stage, int chunk) const { return chunk * stages + stage; }
  // Max number of (micro-batch, chunk) units on `stage` whose forward is done
  // and whose backward (zb-h1: weight_grad) is not: the activation sets the
  // stage must hold at once.
  int max_in_flight(int stage) const;
  // Compact form, comma separated: "3F1" forward of mb 3 chunk 1, "3B1" its
  // backward, "3W1" its weight gradient (zb-h1), "sA3.1>2" send activation
  // (mb 3, chunk 1) to stage 2, "rA3.1<0" receive activation from stage 0,
  // "sG"/"rG" the same for gradients, "RG" reduce gradients, "OPT" optimizer step.
  std::string to_string(int stage) const;
};

// Activation sets each chunk of `stage` holds at once under `schedule`: the
// most forwards of that chunk done and not yet followed by their backward
// (zb-h1: their weight_grad, which still reads the saved inputs) (at least 1:
// evaluation uses one per chunk). What the runtime allocates a
// slot for, per chunk (partition/memory_plan.h); their sum can exceed
// max_in_flight(stage), since chunks peak at different times.
std::vector<int> slots_per_chunk(const Schedule& schedule, int stage);

// The in-flight bound make_schedule promises for a stage (see schedule.cpp):
// gpipe: micro_batches; 1f1b: min(stages - stage, micro_batches);
// interleaved: min(2*(stages - stage - 1) + (chunks - 1)*stages + 1, micro_batches*chunks);
// zb-h1: min(stages, micro_batches) on every stage (1F1B's first stage's count).
int promised_in_flight(ScheduleKind kind, int stages, int micro_batches, int chunks, int stage);

// Fails, naming the offending factor, when the combination is impossible:
// gpipe, 1f1b and zb-h1 need chunks == 1; interleaved needs stages >= 2, chunks >= 2
// and micro_batches % stages == 0; all sizes must be positive.
Expected<Schedule> make_schedule(ScheduleKind kind, int stages, int micro_batches, int chunks);

// The message a send/recv carries, the same on both ends: the micro-batch and
// the virtual-stage edge it crosses (edge e joins virtual stages e and e+1).
struct MessageKey {
  bool is_grad;
  int mb;
  int edge;
  bool operator==(const MessageKey&) const = default;
};
MessageKey message_key(const Schedule& s, int stage, const Instr& in);

}  // namespace tera
