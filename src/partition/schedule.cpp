// The three schedules. Each is an order of compute units (forward or backward
// of one micro-batch on one model chunk) per stage; the send/recv around each
// unit follow from where its neighbours live, so the orders are all a schedule
// decides. The interleaved order is Megatron-LM's (Narayanan et al. 2021,
// Sec. 2.2.2): units go in groups of `stages` micro-batches per chunk, and a
// stage warms up with 2*(stages - stage - 1) + (chunks - 1)*stages forwards.
#include "partition/schedule.h"

#include <algorithm>

#include <fmt/format.h>

namespace tera {

namespace {

struct Unit {
  bool backward;
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
  return {backward, group * stages + within % stages, chunk};
}

std::vector<Unit> unit_order(ScheduleKind kind, int stages, int M, int chunks, int s) {
  std::vector<Unit> order;
  if (kind == ScheduleKind::gpipe) {
    for (int mb = 0; mb < M; ++mb) order.push_back({false, mb, 0});
    for (int mb = 0; mb < M; ++mb) order.push_back({true, mb, 0});
    return order;
  }
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

}  // namespace

std::vector<int> slots_per_chunk(const Schedule& schedule, int stage) {
  std::vector<int> in_flight(static_cast<size_t>(schedule.chunks), 0), most(static_cast<size_t>(schedule.chunks), 0);
  for (const Instr& in : schedule.per_stage[static_cast<size_t>(stage)]) {
    const size_t c = static_cast<size_t>(in.chunk);
    if (in.kind == InstrKind::forward) {
      most[c] = std::max(most[c], ++in_flight[c]);
    } else if (in.kind == InstrKind::backward) {
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
      if (!u.backward) {
        if (v > 0) list.push_back({InstrKind::recv_act, u.mb, u.chunk, prev});
        list.push_back({InstrKind::forward, u.mb, u.chunk, -1});
        if (v < V - 1) list.push_back({InstrKind::send_act, u.mb, u.chunk, next});
      } else {
        if (v < V - 1) list.push_back({InstrKind::recv_grad, u.mb, u.chunk, next});
        list.push_back({InstrKind::backward, u.mb, u.chunk, -1});
        if (v > 0) list.push_back({InstrKind::send_grad, u.mb, u.chunk, prev});
      }
    }
    list.push_back({InstrKind::reduce_grads, -1, -1, -1});
    list.push_back({InstrKind::optimizer_step, -1, -1, -1});
  }
  return sch;
}

int Schedule::max_in_flight(int stage) const {
  int now = 0, most = 0;
  for (const Instr& in : per_stage[static_cast<size_t>(stage)]) {
    if (in.kind == InstrKind::forward) most = std::max(most, ++now);
    if (in.kind == InstrKind::backward) --now;
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
