// One simulated step broken down by where the time goes on its critical
// stage (the stage that finishes last, so its parts add up to the step
// time): compute by op class net of recompute, the recomputed forward,
// each exposed communication, the pipeline bubble, the optimizer step and
// the fixed per-step overhead. `tera plan --explain` and `tera plan
// validate --explain` print it; validate groups its misses by its dominant
// term.
#pragma once

#include <array>
#include <string>

#include "plan/simulator.h"

namespace tera {

// In print order; the first three are compute.
enum class StepTerm {
  gemm,        // GEMMs (linear layers, LM head), without recompute
  attention,   // attention kernels, without recompute
  memory,      // memory-bound ops (norms, activations, residuals, CE), without recompute
  recompute,   // the forward re-run inside the backward (activation recompute), all classes
  tp_comm,     // exposed tensor- (and context-) parallel communication
  zero_comm,   // exposed ZeRO-2/3 gather and reduce-scatter
  bubble,      // waiting for pipeline messages (fill, drain, stalls)
  p2p,         // blocked in its own pipeline sends
  dp_reduce,   // exposed data-parallel gradient reduction
  optimizer,   // optimizer step (+ exposed ZeRO-1/2 parameter gather)
  overhead,    // fixed per-step overhead
};
constexpr int kStepTerms = 11;
constexpr std::array<StepTerm, kStepTerms> kAllStepTerms = {
    StepTerm::gemm,   StepTerm::attention, StepTerm::memory,    StepTerm::recompute,
    StepTerm::tp_comm, StepTerm::zero_comm, StepTerm::bubble,   StepTerm::p2p,
    StepTerm::dp_reduce, StepTerm::optimizer, StepTerm::overhead};

// Short key ("gemm", "tp_comm", ...), as the grouping table prints it.
const char* step_term_key(StepTerm t);
// The line --explain prints (the attention line names the kernel the stack runs).
const char* step_term_label(StepTerm t, bool flash_attention);
bool is_compute(StepTerm t);

struct StepBreakdown {
  std::array<double, kStepTerms> seconds{};  // by StepTerm
  int stage = 0;                             // the critical stage
  double step_time = 0;                      // the simulated step time
  double operator[](StepTerm t) const { return seconds[static_cast<size_t>(t)]; }
  double total() const;    // the sum of the terms (= step_time up to rounding)
  double compute() const;  // gemm + attention + memory
};

// The critical stage's timeline, by term. The overhead term is what remains
// of the stage's end after the others (the simulator's per-step overhead).
StepBreakdown step_breakdown(const SimResult& sim);

// A step is compute-bound when no other term reaches this share of it.
constexpr double kDominantShare = 0.05;
// The largest term besides compute (gemm, attention, memory), or "compute"
// when that term is below kDominantShare of the step.
const char* dominant_term(const StepBreakdown& b);

// The factor term t must be multiplied by, the others unchanged, for the
// step to take `target` seconds; < 0 when that term alone cannot get there.
double factor_to_match(const StepBreakdown& b, StepTerm t, double target);

// One line per term: label, seconds, share of the step. With target_s > 0 a
// last column gives the factor that term alone would need for the step to
// take target_s ("x1.25"; "-" when that term alone cannot get there).
std::string breakdown_text(const StepBreakdown& b, bool flash_attention, double target_s = 0);

}  // namespace tera
