// The step's breakdown (step_breakdown.h). Recompute is carried by the cost
// model inside each class (PassCost::rc_*); here it is taken out of them.
#include "plan/step_breakdown.h"

#include <fmt/format.h>

namespace tera {

const char* step_term_key(StepTerm t) {
  switch (t) {
    case StepTerm::gemm: return "gemm";
    case StepTerm::attention: return "attention";
    case StepTerm::memory: return "memory_bound";
    case StepTerm::recompute: return "recompute";
    case StepTerm::tp_comm: return "tp_comm";
    case StepTerm::zero_comm: return "zero_comm";
    case StepTerm::bubble: return "pp_bubble";
    case StepTerm::p2p: return "pp_sends";
    case StepTerm::dp_reduce: return "dp_reduce";
    case StepTerm::optimizer: return "optimizer";
    case StepTerm::overhead: return "overhead";
  }
  return "?";
}

const char* step_term_label(StepTerm t, bool flash_attention) {
  switch (t) {
    case StepTerm::gemm: return "compute: GEMMs (linear layers, LM head)";
    case StepTerm::attention:
      return flash_attention ? "compute: attention (fused flash kernel)" : "compute: attention (scores, softmax, dropout)";
    case StepTerm::memory: return "compute: memory-bound ops (norms, GeLU, residual, CE)";
    case StepTerm::recompute: return "recompute (forward re-run in the backward)";
    case StepTerm::tp_comm: return "exposed tensor-parallel communication";
    case StepTerm::zero_comm: return "exposed ZeRO-2/3 gather and reduce-scatter";
    case StepTerm::bubble: return "pipeline bubble (waiting for activations/gradients)";
    case StepTerm::p2p: return "blocking pipeline sends";
    case StepTerm::dp_reduce: return "exposed data-parallel gradient reduction";
    case StepTerm::optimizer: return "optimizer step (+ exposed ZeRO parameter gather)";
    case StepTerm::overhead: return "per-step overhead";
  }
  return "?";
}

bool is_compute(StepTerm t) { return t == StepTerm::gemm || t == StepTerm::attention || t == StepTerm::memory; }

double StepBreakdown::total() const {
  double s = 0;
  for (double x : seconds) s += x;
  return s;
}

double StepBreakdown::compute() const { return (*this)[StepTerm::gemm] + (*this)[StepTerm::attention] + (*this)[StepTerm::memory]; }

StepBreakdown step_breakdown(const SimResult& sim) {
  StepBreakdown b;
  b.stage = sim.critical_stage;
  b.step_time = sim.step_time;
  const StageTimeline& st = sim.stages[static_cast<size_t>(sim.critical_stage)];
  auto set = [&](StepTerm t, double v) { b.seconds[static_cast<size_t>(t)] = v; };
  set(StepTerm::gemm, st.busy.gemm - st.busy.rc_gemm);
  set(StepTerm::attention, st.busy.attention - st.busy.rc_attention);
  set(StepTerm::memory, st.busy.memory - st.busy.rc_memory);
  set(StepTerm::recompute, st.busy.recompute());
  set(StepTerm::tp_comm, st.busy.tp_comm);
  set(StepTerm::zero_comm, st.busy.dp_comm);
  set(StepTerm::bubble, st.wait);
  set(StepTerm::p2p, st.p2p);
  set(StepTerm::dp_reduce, st.dp_exposed);
  set(StepTerm::optimizer, st.optimizer);
  set(StepTerm::overhead, st.end - (st.busy.total() + st.wait + st.p2p + st.dp_exposed + st.optimizer));
  return b;
}

const char* dominant_term(const StepBreakdown& b) {
  StepTerm best = StepTerm::gemm;
  double most = -1;
  for (StepTerm t : kAllStepTerms) {
    if (!is_compute(t) && b[t] > most) best = t, most = b[t];
  }
  return most >= kDominantShare * b.step_time ? step_term_key(best) : "compute";
}

double factor_to_match(const StepBreakdown& b, StepTerm t, double target) {
  const double own = b[t];
  const double rest = b.total() - own;
  if (own <= 0 || target <= rest) return -1;
  return (target - rest) / own;
}

std::string breakdown_text(const StepBreakdown& b, bool flash_attention, double target_s) {
  std::string s;
  const double T = b.step_time;
  for (StepTerm t : kAllStepTerms) {
    s += fmt::format("  {:<48} {:>10.4f} s  {:>5.1f}%", step_term_label(t, flash_attention), b[t], 100 * b[t] / T);
    if (target_s > 0) {
      const double f = factor_to_match(b, t, target_s);
      s += f < 0 ? fmt::format("  {:>9}", "-") : fmt::format("  {:>9}", fmt::format("x{:.3f}", f));
    }
    s += "\n";
  }
  return s;
}

}  // namespace tera
