// The four schedules. Each is an order of compute units (forward, backward
// or weight gradient of one micro-batch on one model chunk) per stage; the
// send/recv around each unit follow from where its neighbours live, so the
// orders are all a schedule decides. The interleaved order is Megatron-LM's
// (Narayanan et al. 2021, Sec. 2.2.2): units go in groups of `stages`
// micro-batches per chunk, and a stage warms up with
// 2*(stages - stage - 1) + (chunks - 1)*stages forwards. ZB-H1 (Qi et al.
// 2024, Sec. 2.1) is 1F1B's order of F and B with the W passes moved: see
// zb_h1_order.
#include "partition/schedule.h"

#include <algorithm>

#include <fmt/format.h>

namespace tera {

namespace {

struct Unit {
  InstrKind kind;  // forward, backward or weight_grad
  int mb;
  int chunk;
};

// Megatron's mapping from the k-th forward (or backward) unit of a stage to
// (micro-batch, chunk): groups of `stages` micro-batches walk the chunks in
// order (forward) or in reverse (backward).
Unit interleaved_unit(int k, bool backward, int stages, int chunks) {
  const int group = k / (stages * chunks), within = k % (stages * chunks);
  int chunk = within / stages;
  if (backward) chunk = chunks - 1 - chunk;
  return {backward ? InstrKind::backward : InstrKind::forward, group * stages + within % stages, chunk};
}

// ZB-H1 on stage s: 1F1B's warm-up (stages - s - 1 forwards), its steady F, B
// pairs and its cool-down Bs, in 1F1B's order (B only: the input gradient,
// all the next stage waits for). The W of each micro-batch is deferred so that
// every stage holds min(stages, M) micro-batches between F and W, as 1F1B's
// first stage holds between F and B: in the steady phase stage s runs
// W(j - s) after B(j) (stage 0 no delay, the last stage stages - 1), in the
// cool-down one W after each B (again W(j - s) when M >= stages), then the
// Ws left. The paper's Figure 3 (top)
// is this order for 4 stages; at T_F = T_B = T_W its bubble is
// (stages - 1)(T_F + T_B - T_W), a third of 1F1B's (stages - 1)(T_F + T_B + T_W)
// (tests/plan/test_simulator.cpp).
std::vector<Unit> zb_h1_order(int stages, int M, int s) {
  const int warmup = std::min(M, stages - s - 1);
  std::vector<Unit> order;
  int next_w = 0;  // micro-batches whose W ran
  for (int k = 0; k < warmup; ++k) order.push_back({InstrKind::forward, k, 0});
  for (int i = 0; i < M - warmup; ++i) {
    order.push_back({InstrKind::forward, warmup + i, 0});
    order.push_back({InstrKind::backward, i, 0});
    if (i >= s) order.push_back({InstrKind::weight_grad, next_w++, 0});
  }
  for (int k = M - warmup; k < M; ++k) {  // next_w <= k: each W after its B
    order.push_back({InstrKind::backward, k, 0});
    order.push_back({InstrKind::weight_grad, next_w++, 0});
  }
  while (next_w < M) order.push_back({InstrKind::weight_grad, next_w++, 0});
  return order;
}

std::vector<Unit> unit_order(ScheduleKind kind, int stages, int M, int chunks, int s) {
  std::vector<Unit> order;
  if (kind == ScheduleKind::gpipe) {
    for (int mb = 0; mb < M; ++mb) order.push_back({InstrKind::forward, mb, 0});
    for (int mb = 0; mb < M; ++mb) order.push_back({InstrKind::backward, mb, 0});
    return order;
  }
  if (kind == ScheduleKind::zb_h1) return zb_h1_order(stages, M, s);
  const int total = M * chunks;
  const int warmup = std::min(total, kind == ScheduleKind::one_f_one_b
                                         ? stages - s - 1
                                         : 2 * (stages - s - 1) + (chunks - 1) * stages);
  auto fwd = [&](int k) { return interleaved_unit(k, false, stages, chunks); };
  auto bwd = [&](int k) { return interleaved_unit(k, true, stages, chunks); };
  for (int k = 0; k < warmup; ++k) order.push_back(fwd(k));
  for (int i = 0; i < total - warmup; ++i) {
    order.push_back(fwd(warmup + i));
    order.push_back(bwd(i));
  }
  for (int k = total - warmup; k < total; ++k) order.push_back(bwd(k));
  return order;
}

// The instruction after which a micro-batch's activations are no longer
// read: its weight gradient where the backward is split, else its backward.
InstrKind releasing_instr(ScheduleKind kind) {
  return splits_backward(kind) ? InstrKind::weight_grad : InstrKind::backward;
}

}  // namespace

std::vector<int> slots_per_chunk(const Schedule& schedule, int stage) {
  std::vector<int> in_flight(static_cast<size_t>(schedule.chunks), 0), most(static_cast<size_t>(schedule.chunks), 0);
  const InstrKind release = releasing_instr(schedule.kind);
  for (const Instr& in : schedule.per_stage[static_cast<size_t>(stage)]) {
    const size_t c = static_cast<size_t>(in.chunk);
    if (in.kind == InstrKind::forward) {
      most[c] = std::max(most[c], ++in_flight[c]);
    } else if (in.kind == release) {
      --in_flight[c];
    }
  }
  for (int& m : most) m = std::max(m, 1);  // evaluation uses slot 0 of every chunk
  return most;
}

int promised_in_flight(ScheduleKind kind, int stages, int M, int chunks, int stage) {
  switch (kind) {
    case ScheduleKind::gpipe: return M;
    case ScheduleKind::one_f_one_b: return std::min(stages - stage, M);
    case ScheduleKind::interleaved:
      return std::min(2 * (stages - stage - 1) + (chunks - 1) * stages + 1, M * chunks);
    case ScheduleKind::zb_h1: return std::min(stages, M);
  }
  return 0;
}

Expected<Schedule> make_schedule(ScheduleKind kind, int stages, int M, int chunks) {
  TERA_RETURN_IF_ERROR(check_schedule(kind, stages, M, chunks));
  Schedule sch{kind, stages, M, chunks, {}};
  const int V = sch.virtual_stages();
  sch.per_stage.resize(static_cast<size_t>(stages));
  for (int s = 0; s < stages; ++s) {
    auto& list = sch.per_stage[static_cast<size_t>(s)];
    for (const Unit& u : unit_order(kind, stages, M, chunks, s)) {
      const int v = sch.virtual_stage(s, u.chunk);
      const int prev = (v - 1 + V) % stages, next = (v + 1) % stages;  // physical neighbours
      if (u.kind == InstrKind::forward) {
        if (v > 0) list.push_back({InstrKind::recv_act, u.mb, u.chunk, prev});
        list.push_back({InstrKind::forward, u.mb, u.chunk, -1});
        if (v < V - 1) list.push_back({InstrKind::send_act, u.mb, u.chunk, next});
      } else if (u.kind == InstrKind::backward) {
        if (v < V - 1) list.push_back({InstrKind::recv_grad, u.mb, u.chunk, next});
        list.push_back({InstrKind::backward, u.mb, u.chunk, -1});
        if (v > 0) list.push_back({InstrKind::send_grad, u.mb, u.chunk, prev});
      } else {
        list.push_back({InstrKind::weight_grad, u.mb, u.chunk, -1});  // local: no message
      }
    }
    list.push_back({InstrKind::reduce_grads, -1, -1, -1});
    list.push_back({InstrKind::optimizer_step, -1, -1, -1});
  }
  return sch;
}

int Schedule::max_in_flight(int stage) const {
  int now = 0, most = 0;
  const InstrKind release = releasing_instr(kind);
  for (const Instr& in : per_stage[static_cast<size_t>(stage)]) {
    if (in.kind == InstrKind::forward) most = std::max(most, ++now);
    if (in.kind == release) --now;
  }
  return most;
}

std::string Schedule::to_string(int stage) const {
  std::string out;
  for (const Instr& in : per_stage[static_cast<size_t>(stage)]) {
    if (!out.empty()) out += ',';
    switch (in.kind) {
      case InstrKind::forward: out += fmt::format("{}F{}", in.mb, in.chunk); break;
      case InstrKind::backward: out += fmt::format("{}B{}", in.mb, in.chunk); break;
      case InstrKind::weight_grad: out += fmt::format("{}W{}", in.mb, in.chunk); break;
      case InstrKind::send_act: out += fmt::format("sA{}.{}>{}", in.mb, in.chunk, in.peer); break;
      case InstrKind::recv_act: out += fmt::format("rA{}.{}<{}", in.mb, in.chunk, in.peer); break;
      case InstrKind::send_grad: out += fmt::format("sG{}.{}>{}", in.mb, in.chunk, in.peer); break;
      case InstrKind::recv_grad: out += fmt::format("rG{}.{}<{}", in.mb, in.chunk, in.peer); break;
      case InstrKind::reduce_grads: out += "RG"; break;
      case InstrKind::optimizer_step: out += "OPT"; break;
    }
  }
  return out;
}

MessageKey message_key(const Schedule& s, int stage, const Instr& in) {
  const int v = s.virtual_stage(stage, in.chunk);
  switch (in.kind) {
    case InstrKind::send_act: return {false, in.mb, v};
    case InstrKind::recv_act: return {false, in.mb, v - 1};
    case InstrKind::send_grad: return {true, in.mb, v - 1};
    case InstrKind::recv_grad: return {true, in.mb, v};
    default: TERA_ASSERT(false, "message_key of a compute instruction");
  }
  return {};
}

}  // namespace tera
