// The step simulator. Activations leave stage s for (s+1) % stages and
// gradients for (s-1) % stages (virtual stage v = chunk*stages + s), so each
// stage has one outgoing channel per kind, served in order on one link.
#include "plan/simulator.h"

#include <algorithm>
#include <numeric>

namespace tera {

namespace {

struct Channel {
  std::vector<double> arrivals;  // in send order
  size_t next = 0;               // next to be received
  double link_free = 0;          // when the link finishes its last transfer
};

// The simulation's running state: per-stage clocks and program counters, the
// outgoing channels, and the window of each (stage, chunk)'s latest backward
// (of a split backward: its latest W).
struct SimState {
  const Schedule& sch;
  const StepCosts& costs;
  const SimOptions& opt;
  std::vector<Channel> ch;               // [stage * 2 + is_grad], outgoing
  std::vector<size_t> pc;                // [stage]: next instruction
  std::vector<double> clock;             // [stage]
  std::vector<double> lb_start, lb_end;  // [stage * chunks + chunk]

  SimState(const Schedule& sch_, const StepCosts& costs_, const SimOptions& opt_)
      : sch(sch_),
        costs(costs_),
        opt(opt_),
        ch(static_cast<size_t>(2 * sch_.stages)),
        pc(static_cast<size_t>(sch_.stages), 0),
        clock(static_cast<size_t>(sch_.stages), 0.0),
        lb_start(static_cast<size_t>(sch_.stages * sch_.chunks), 0.0),
        lb_end(static_cast<size_t>(sch_.stages * sch_.chunks), 0.0) {}
};

// The price of a compute instruction of virtual stage v: F; the whole
// backward, or, where the schedule splits it, B (bwd_input) and W (bwd_weight).
const PassCost& pass_cost(const SimState& st, const Instr& in, size_t v) {
  if (in.kind == InstrKind::forward) return st.costs.fwd[v];
  if (!splits_backward(st.sch.kind)) return st.costs.bwd[v];
  return in.kind == InstrKind::backward ? st.costs.bwd_input[v] : st.costs.bwd_weight[v];
}

// A compute pass on stage s from time t; the pass that completes a
// micro-batch's weight gradients (the backward, or the W of a split one)
// records its window.
void run_pass(SimState& st, int s, const Instr& in, StageTimeline& tl, double& t) {
  const PassCost& c = pass_cost(st, in, static_cast<size_t>(st.sch.virtual_stage(s, in.chunk)));
  const bool completes_grads = in.kind == (splits_backward(st.sch.kind) ? InstrKind::weight_grad : InstrKind::backward);
  const size_t k = static_cast<size_t>(s * st.sch.chunks + in.chunk);
  if (completes_grads) st.lb_start[k] = t;
  tl.busy += c;
  t += c.total();
  if (completes_grads) st.lb_end[k] = t;
}

// A send on stage s's outgoing link; the stage waits for it only without p2p overlap.
void run_send(SimState& st, int s, const Instr& in, StageTimeline& tl, double& t) {
  Channel& c = st.ch[static_cast<size_t>(2 * s + (in.kind == InstrKind::send_grad))];
  c.link_free = std::max(t, c.link_free) + st.costs.p2p;
  c.arrivals.push_back(c.link_free);
  if (!st.opt.p2p_overlap) {
    tl.p2p += c.link_free - t;
    t = c.link_free;
  }
}

// A receive from the peer's channel; false (nothing recorded) when nothing has been sent yet.
bool run_recv(SimState& st, const Instr& in, StageTimeline& tl, double& t) {
  Channel& c = st.ch[static_cast<size_t>(2 * in.peer + (in.kind == InstrKind::recv_grad))];
  if (c.next >= c.arrivals.size()) return false;  // before recording: retried later
  const double arrival = c.arrivals[c.next++];
  if (arrival > t) {
    tl.wait += arrival - t;
    t = arrival;
  }
  return true;
}

// When stage s's gradient reduction ends if it overlaps the backwards: each
// chunk's reduction starts with its last backward and ends no earlier than
// that backward plus one bucket.
double overlapped_reduce_end(const SimState& st, int s, double t) {
  const int C = st.sch.chunks;
  const double total = st.costs.dp_reduce[static_cast<size_t>(s)];
  std::vector<int> order(static_cast<size_t>(C));
  std::iota(order.begin(), order.end(), 0);
  std::sort(order.begin(), order.end(), [&](int a, int b) {
    return st.lb_start[static_cast<size_t>(s * C + a)] < st.lb_start[static_cast<size_t>(s * C + b)];
  });
  const double per_chunk = total / C;
  const double last = std::min(per_chunk, st.costs.dp_last_bucket[static_cast<size_t>(s)]);
  double free = 0, hidden = 0;
  for (int c : order) {
    const size_t k = static_cast<size_t>(s * C + c);
    const double start = std::max(free, st.lb_start[k]);
    hidden += std::max(0.0, std::min(start + per_chunk, st.lb_end[k]) - start);
    free = std::max(start + per_chunk, st.lb_end[k] + last);
  }
  // What ran beside the backward still slows it by overlap_loss.
  return std::max(t, free) + st.opt.overlap_loss * hidden;
}

// Stage s's data-parallel gradient reduction from time t; what is not hidden is exposed.
void run_reduce_grads(const SimState& st, int s, StageTimeline& tl, double& t) {
  double done = t + st.costs.dp_reduce[static_cast<size_t>(s)];
  if (st.opt.dp_overlap) done = overlapped_reduce_end(st, s, t);
  tl.dp_exposed += done - t;
  t = done;
}

// Runs one instruction of stage s, advancing its clock t; false when it is a receive that must wait.
bool run_instr(SimState& st, int s, const Instr& in, StageTimeline& tl, double& t) {
  switch (in.kind) {
    case InstrKind::forward:
    case InstrKind::backward:
    case InstrKind::weight_grad: run_pass(st, s, in, tl, t); break;
    case InstrKind::send_act:
    case InstrKind::send_grad: run_send(st, s, in, tl, t); break;
    case InstrKind::recv_act:
    case InstrKind::recv_grad: return run_recv(st, in, tl, t);
    case InstrKind::reduce_grads: run_reduce_grads(st, s, tl, t); break;
    case InstrKind::optimizer_step:
      tl.optimizer += st.costs.optimizer[static_cast<size_t>(s)];
      t += st.costs.optimizer[static_cast<size_t>(s)];
      break;
  }
  return true;
}

// Runs stage s until its list ends or a receive must wait; true if any instruction ran.
bool run_stage(SimState& st, int s, StageTimeline& tl, size_t* remaining, std::vector<SimSpan>* spans) {
  const auto& list = st.sch.per_stage[static_cast<size_t>(s)];
  double& t = st.clock[static_cast<size_t>(s)];
  size_t& i = st.pc[static_cast<size_t>(s)];
  bool progressed = false;
  for (; i < list.size(); ++i, --*remaining, progressed = true) {
    const Instr& in = list[i];
    const double t_begin = t;
    if (!run_instr(st, s, in, tl, t)) break;
    if (spans != nullptr) spans->push_back({s, in.kind, in.mb, in.chunk, in.peer, t_begin, t});
  }
  return progressed;
}

}  // namespace

SimResult simulate_step(const Schedule& sch, const StepCosts& costs, const SimOptions& opt,
                        std::vector<SimSpan>* spans) {
  const int S = sch.stages;
  TERA_ASSERT(!splits_backward(sch.kind) || (costs.bwd_input.size() == costs.bwd.size() &&
                                             costs.bwd_weight.size() == costs.bwd.size()),
              "simulate_step: a split-backward schedule needs bwd_input and bwd_weight costs");
  SimResult r;
  r.stages.resize(static_cast<size_t>(S));
  SimState st(sch, costs, opt);
  size_t remaining = 0;
  for (const auto& list : sch.per_stage) remaining += list.size();
  while (remaining > 0) {
    bool progressed = false;
    for (int s = 0; s < S; ++s) {
      if (run_stage(st, s, r.stages[static_cast<size_t>(s)], &remaining, spans)) progressed = true;
    }
    TERA_ASSERT(progressed, "simulate_step: the schedule deadlocked (schedules are tested deadlock-free)");
  }
  for (int s = 0; s < S; ++s) {
    StageTimeline& tl = r.stages[static_cast<size_t>(s)];
    tl.end = st.clock[static_cast<size_t>(s)] + costs.step_overhead;
    if (tl.end > r.step_time) {
      r.step_time = tl.end;
      r.critical_stage = s;
    }
  }
  return r;
}

double step_time_lower_bound(const StepCosts& costs, int S, int C, int64_t M, bool blocking_sends,
                             bool split_backward) {
  const int V = S * C;
  double best = 0, tail = 1e300;
  double prefix_f = 0, prefix_b = 0;  // first micro-batch's way through chunk 0 of earlier stages
  for (int s = 0; s < S; ++s) {
    double busy = 0;
    for (int c = 0; c < C; ++c) {
      const size_t v = static_cast<size_t>(c * S + s);
      busy += costs.fwd[v].total() +
              (split_backward ? costs.bwd_input[v].total() + costs.bwd_weight[v].total() : costs.bwd[v].total());
      if (blocking_sends) busy += costs.p2p * ((static_cast<int>(v) < V - 1) + (v > 0));
    }
    // A split backward's stage may end on Ws that no earlier stage waits for:
    // only the way in (prefix_f) is certain.
    best = std::max(best, prefix_f + static_cast<double>(M) * busy + (split_backward ? 0.0 : prefix_b));
    prefix_f += costs.fwd[static_cast<size_t>(s)].total() + costs.p2p;
    if (!split_backward) prefix_b += costs.bwd[static_cast<size_t>(s)].total() + costs.p2p;
    const double reduce = std::min(costs.dp_reduce[static_cast<size_t>(s)] / C, costs.dp_last_bucket[static_cast<size_t>(s)]);
    tail = std::min(tail, reduce + costs.optimizer[static_cast<size_t>(s)]);
  }
  return best + tail + costs.step_overhead;
}

}  // namespace tera
