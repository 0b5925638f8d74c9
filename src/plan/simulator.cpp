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

}  // namespace

SimResult simulate_step(const Schedule& sch, const StepCosts& costs, const SimOptions& opt,
                        std::vector<SimSpan>* spans) {
  const int S = sch.stages, C = sch.chunks;
  SimResult r;
  r.stages.resize(static_cast<size_t>(S));
  std::vector<Channel> ch(static_cast<size_t>(2 * S));  // [stage * 2 + is_grad], outgoing
  std::vector<size_t> pc(static_cast<size_t>(S), 0);
  std::vector<double> clock(static_cast<size_t>(S), 0.0);
  // Window of the latest backward of each (stage, chunk).
  std::vector<double> lb_start(static_cast<size_t>(S * C), 0.0), lb_end(static_cast<size_t>(S * C), 0.0);
  size_t remaining = 0;
  for (const auto& list : sch.per_stage) remaining += list.size();
  while (remaining > 0) {
    bool progressed = false;
    for (int s = 0; s < S; ++s) {
      const auto& list = sch.per_stage[static_cast<size_t>(s)];
      StageTimeline& tl = r.stages[static_cast<size_t>(s)];
      double& t = clock[static_cast<size_t>(s)];
      size_t& i = pc[static_cast<size_t>(s)];
      for (; i < list.size(); ++i, --remaining, progressed = true) {
        const Instr& in = list[i];
        const double t_begin = t;
        switch (in.kind) {
          case InstrKind::forward: {
            const PassCost& c = costs.fwd[static_cast<size_t>(sch.virtual_stage(s, in.chunk))];
            tl.busy += c;
            t += c.total();
            break;
          }
          case InstrKind::backward: {
            const PassCost& c = costs.bwd[static_cast<size_t>(sch.virtual_stage(s, in.chunk))];
            const size_t k = static_cast<size_t>(s * C + in.chunk);
            lb_start[k] = t;
            tl.busy += c;
            t += c.total();
            lb_end[k] = t;
            break;
          }
          case InstrKind::send_act:
          case InstrKind::send_grad: {
            Channel& c = ch[static_cast<size_t>(2 * s + (in.kind == InstrKind::send_grad))];
            c.link_free = std::max(t, c.link_free) + costs.p2p;
            c.arrivals.push_back(c.link_free);
            if (!opt.p2p_overlap) {
              tl.p2p += c.link_free - t;
              t = c.link_free;
            }
            break;
          }
          case InstrKind::recv_act:
          case InstrKind::recv_grad: {
            Channel& c = ch[static_cast<size_t>(2 * in.peer + (in.kind == InstrKind::recv_grad))];
            if (c.next >= c.arrivals.size()) goto blocked;  // before recording: retried later
            const double arrival = c.arrivals[c.next++];
            if (arrival > t) {
              tl.wait += arrival - t;
              t = arrival;
            }
            break;
          }
          case InstrKind::reduce_grads: {
            const double total = costs.dp_reduce[static_cast<size_t>(s)];
            double done = t + total;
            if (opt.dp_overlap) {
              // Each chunk's reduction starts with its last backward and ends
              // no earlier than that backward plus one bucket.
              std::vector<int> order(static_cast<size_t>(C));
              std::iota(order.begin(), order.end(), 0);
              std::sort(order.begin(), order.end(), [&](int a, int b) {
                return lb_start[static_cast<size_t>(s * C + a)] < lb_start[static_cast<size_t>(s * C + b)];
              });
              const double per_chunk = total / C;
              const double last = std::min(per_chunk, costs.dp_last_bucket[static_cast<size_t>(s)]);
              double free = 0, hidden = 0;
              for (int c : order) {
                const size_t k = static_cast<size_t>(s * C + c);
                const double start = std::max(free, lb_start[k]);
                hidden += std::max(0.0, std::min(start + per_chunk, lb_end[k]) - start);
                free = std::max(start + per_chunk, lb_end[k] + last);
              }
              // What ran beside the backward still slows it by overlap_loss.
              done = std::max(t, free) + opt.overlap_loss * hidden;
            }
            tl.dp_exposed += done - t;
            t = done;
            break;
          }
          case InstrKind::optimizer_step:
            tl.optimizer += costs.optimizer[static_cast<size_t>(s)];
            t += costs.optimizer[static_cast<size_t>(s)];
            break;
        }
        if (spans != nullptr) spans->push_back({s, in.kind, in.mb, in.chunk, in.peer, t_begin, t});
      }
    blocked:;
    }
    TERA_ASSERT(progressed, "simulate_step: the schedule deadlocked (schedules are tested deadlock-free)");
  }
  for (int s = 0; s < S; ++s) {
    StageTimeline& tl = r.stages[static_cast<size_t>(s)];
    tl.end = clock[static_cast<size_t>(s)] + costs.step_overhead;
    if (tl.end > r.step_time) {
      r.step_time = tl.end;
      r.critical_stage = s;
    }
  }
  return r;
}

double step_time_lower_bound(const StepCosts& costs, int S, int C, int64_t M, bool blocking_sends) {
  const int V = S * C;
  double best = 0, tail = 1e300;
  double prefix_f = 0, prefix_b = 0;  // first micro-batch's way through chunk 0 of earlier stages
  for (int s = 0; s < S; ++s) {
    double busy = 0;
    for (int c = 0; c < C; ++c) {
      const size_t v = static_cast<size_t>(c * S + s);
      busy += costs.fwd[v].total() + costs.bwd[v].total();
      if (blocking_sends) busy += costs.p2p * ((static_cast<int>(v) < V - 1) + (v > 0));
    }
    best = std::max(best, prefix_f + static_cast<double>(M) * busy + prefix_b);
    prefix_f += costs.fwd[static_cast<size_t>(s)].total() + costs.p2p;
    prefix_b += costs.bwd[static_cast<size_t>(s)].total() + costs.p2p;
    const double reduce = std::min(costs.dp_reduce[static_cast<size_t>(s)] / C, costs.dp_last_bucket[static_cast<size_t>(s)]);
    tail = std::min(tail, reduce + costs.optimizer[static_cast<size_t>(s)]);
  }
  return best + tail + costs.step_overhead;
}

}  // namespace tera
