// The pipeline executor: an interpreter of schedule.h's instruction lists.
#include "parallel/pipeline.h"

#include <fmt/format.h>

#include "core/check.h"
#include "core/timer.h"

namespace tera {

PipelineExecutor::PipelineExecutor(const Schedule& schedule, Gpt& model, ZeroMemory& zero, const Groups& groups,
                                   Trace* trace)
    : sched_(schedule), model_(model), zero_(zero), g_(groups), trace_(trace), stage_(groups.coord.pp) {
  TERA_ASSERT(schedule.stages == groups.layout.pp && model.chunks() == schedule.chunks);
  TERA_ASSERT(model.slots() >= schedule.max_in_flight(stage_), "the model holds fewer slots than the schedule keeps in flight");
  TERA_ASSERT(splits_backward(schedule.kind) == model.block_plan().split_backward,
              "the schedule's weight_grad instructions need the model's split backward (and only they do)");
  slots_.resize(static_cast<size_t>(model.slots()));
  for (int k = 0; k < model.slots(); ++k) free_.push_back(k);
  slot_of_.assign(static_cast<size_t>(schedule.chunks), std::vector<int>(static_cast<size_t>(schedule.micro_batches), -1));
  const int64_t n = model.max_batch() * model.local_seq_len();
  tokens_.resize(static_cast<size_t>(n));
  targets_.resize(static_cast<size_t>(n));
  if (schedule.stages > 1) {
    // Collective over the pipeline group: every stage builds its executor at start-up.
    const Status st = g_.pp_dev->open_routes(routes(schedule));
    TERA_ASSERT(st.is_ok(), "pipeline: " + st.message());
  }
}

int PipelineExecutor::peer_rank(int stage) const { return stage; }

P2pRoute PipelineExecutor::message_route(const Schedule& schedule, int stage, const Instr& in) {
  const int v = schedule.virtual_stage(stage, in.chunk);
  switch (in.kind) {
    case InstrKind::send_act: return {stage, in.peer, kActTag};
    case InstrKind::recv_act: return {in.peer, stage, kActTag};
    // A gradient goes back over edge v - 1, whose receiver posted it at its forward.
    case InstrKind::send_grad: return {stage, in.peer, grad_tag(v - 1)};
    case InstrKind::recv_grad: return {in.peer, stage, grad_tag(v)};
    default: TERA_ASSERT(false, "message_route of a compute instruction");
  }
  return {};
}

std::vector<P2pRoute> PipelineExecutor::routes(const Schedule& schedule) {
  std::vector<P2pRoute> out;
  auto add = [&](const P2pRoute& r) {
    for (const P2pRoute& o : out) {
      if (o == r) return;
    }
    out.push_back(r);
  };
  for (int s = 0; s < schedule.stages; ++s) {
    for (const Instr& in : schedule.per_stage[static_cast<size_t>(s)]) {
      if (in.kind == InstrKind::send_act || in.kind == InstrKind::send_grad) add(message_route(schedule, s, in));
    }
  }
  for (int s = 0; s < schedule.stages; ++s) {
    for (int c = 0; c < schedule.chunks; ++c) {
      if (schedule.virtual_stage(s, c) < schedule.virtual_stages() - 1) add({s, (s + 1) % schedule.stages, kEvalTag});
    }
  }
  return out;
}

int& PipelineExecutor::slot_of(int c, int mb) { return slot_of_[static_cast<size_t>(c)][static_cast<size_t>(mb)]; }

int PipelineExecutor::take_slot(int c, int mb) {
  TERA_ASSERT(slot_of(c, mb) == -1, "micro-batch already holds a slot");
  TERA_ASSERT(!free_.empty(), "the schedule keeps more micro-batches in flight than the stage has slots");
  // The free slot released longest ago whose sends are done; else the
  // oldest, after its sends complete (they were issued before the slot was freed).
  auto pick = free_.begin();
  for (auto it = free_.begin(); it != free_.end(); ++it) {
    SlotState& st = slots_[static_cast<size_t>(*it)];
    bool done = true;
    for (auto& r : st.sends) done = g_.pp_dev->test(r) && done;
    if (done) {
      pick = it;
      break;
    }
  }
  const int k = *pick;
  free_.erase(pick);
  SlotState& st = slots_[static_cast<size_t>(k)];
  wait_sends(st);
  st.mb = mb;
  st.chunk = c;
  slot_of(c, mb) = k;
  return k;
}

void PipelineExecutor::free_slot(int c, int mb) {
  const int k = slot_of(c, mb);
  TERA_ASSERT(k >= 0, "freeing a micro-batch without a slot");
  slots_[static_cast<size_t>(k)].mb = -1;
  slot_of(c, mb) = -1;
  free_.push_back(k);
}

void PipelineExecutor::wait_sends(SlotState& s) {
  for (auto& r : s.sends) g_.pp_dev->wait(r);
  s.sends.clear();
}

void PipelineExecutor::reduce_grads() {
  for (auto& s : slots_) wait_sends(s);
  zero_.finish_gradients();
  // Tied embedding: the first stage's wte (embedding) and the last stage's
  // (LM head) are one parameter; sum their gradients. The unit has the same
  // layout on both stages, so the dp chunks line up.
  if (g_.embedding_dev != nullptr && model_.table().wte_unit() >= 0 && model_.spec().config().tied()) {
    int64_t count = 0;
    float* g = zero_.reduced_grads(model_.table().wte_unit(), &count);
    g_.embedding_dev->all_reduce(g, count, CommType::f32, ReduceOp::sum);
  }
}

std::string PipelineExecutor::run_forward_instr(const Instr& in, const MicroBatchFn& batch, int64_t B, int64_t T,
                                                float dloss, int64_t bytes) {
  // The micro-batch's slot: taken by its receive, or here (the embedding's chunk).
  const int k = slot_of(in.chunk, in.mb) >= 0 ? slot_of(in.chunk, in.mb) : take_slot(in.chunk, in.mb);
  const ChunkPlan& ch = model_.plan().chunks[static_cast<size_t>(in.chunk)];
  int64_t count = B;
  if (ch.embedding || ch.head) count = batch(in.mb, tokens_.data(), targets_.data());
  TERA_ASSERT(count == B, "training micro-batches are full");
  model_.forward(in.chunk, k, tokens_.data(), targets_.data(), B, T, dloss, true);
  // Post the receive of this micro-batch's output gradient now (see pipeline.h).
  const int v = sched_.virtual_stage(stage_, in.chunk);
  if (v < sched_.virtual_stages() - 1) {
    const Instr recv{InstrKind::recv_grad, in.mb, in.chunk, (stage_ + 1) % sched_.stages};
    const P2pRoute r = message_route(sched_, stage_, recv);
    slots_[static_cast<size_t>(k)].grad_recv = g_.pp_dev->irecv(model_.grad_in(in.chunk, k), bytes, peer_rank(r.src), r.tag);
  }
  return fmt::format("F{}.{}", in.mb, in.chunk);
}

std::string PipelineExecutor::run_backward_instr(const Instr& in, int64_t B, int64_t T, std::vector<int>& backwards_done) {
  const int k = slot_of(in.chunk, in.mb);
  TERA_ASSERT(k >= 0, "backward of a micro-batch whose forward did not run here");
  // ZeRO-0/1 reduce a unit's gradient once, after its last micro-batch.
  const size_t c = static_cast<size_t>(in.chunk);
  zero_.set_last_micro_batch(++backwards_done[c] == sched_.micro_batches);
  model_.backward(in.chunk, k, B, T);
  // The first virtual stage sends nothing back: its slot is free now;
  // any other frees it once its input gradient is sent. Under zb-h1 the
  // slot is the weight gradient's until then.
  if (!split() && sched_.virtual_stage(stage_, in.chunk) == 0) free_slot(in.chunk, in.mb);
  return fmt::format("B{}.{}", in.mb, in.chunk);
}

std::string PipelineExecutor::run_weight_grad_instr(const Instr& in, int64_t B, int64_t T, std::vector<int>& weight_grads_done) {
  const int k = slot_of(in.chunk, in.mb);
  TERA_ASSERT(k >= 0, "weight gradient of a micro-batch without a slot");
  // The blocks' units are reduced here: ZeRO-0/1 after the last micro-batch's W.
  zero_.set_last_micro_batch(++weight_grads_done[static_cast<size_t>(in.chunk)] == sched_.micro_batches);
  model_.weight_grad(in.chunk, k, B, T);
  free_slot(in.chunk, in.mb);  // reused once its gradient send (if any) completed
  return fmt::format("W{}.{}", in.mb, in.chunk);
}

std::string PipelineExecutor::run_send_instr(const Instr& in, int64_t bytes) {
  const bool grad = in.kind == InstrKind::send_grad;
  const int k = slot_of(in.chunk, in.mb);
  TERA_ASSERT(k >= 0, "send from a micro-batch without a slot");
  const float* buf = grad ? model_.grad_out(in.chunk, k) : model_.output(in.chunk, k);
  const P2pRoute r = message_route(sched_, stage_, in);
  slots_[static_cast<size_t>(k)].sends.push_back(g_.pp_dev->isend(buf, bytes, peer_rank(r.dst), r.tag));
  if (grad && !split()) free_slot(in.chunk, in.mb);  // reused only once this send completes
  return fmt::format("s{}{}.{}>{}", grad ? 'G' : 'A', in.mb, in.chunk, in.peer);
}

// A receive waits: the time it takes is the stage's idle time (the bubble).
std::string PipelineExecutor::run_recv_instr(const Instr& in, int64_t bytes, double t0) {
  const bool grad = in.kind == InstrKind::recv_grad;
  const int k = grad ? slot_of(in.chunk, in.mb) : take_slot(in.chunk, in.mb);
  TERA_ASSERT(k >= 0, "gradient for a micro-batch without a slot");
  if (grad) {
    // Posted at the micro-batch's forward.
    Request& r = slots_[static_cast<size_t>(k)].grad_recv;
    TERA_ASSERT(r.pending(), "the gradient receive was not posted at the forward");
    g_.pp_dev->wait(r);
  } else {
    const P2pRoute route = message_route(sched_, stage_, in);
    Request r = g_.pp_dev->irecv(model_.input(in.chunk, k), bytes, peer_rank(route.src), route.tag);
    g_.pp_dev->wait(r);
  }
  idle_ += now_seconds() - t0;
  return fmt::format("r{}{}.{}<{}", grad ? 'G' : 'A', in.mb, in.chunk, in.peer);
}

void PipelineExecutor::run_step(const MicroBatchFn& batch, int64_t B, int64_t T, float dloss) {
  const double t_start = now_seconds();
  idle_ = 0;
  std::vector<int> backwards_done(static_cast<size_t>(sched_.chunks), 0);
  std::vector<int> weight_grads_done(static_cast<size_t>(sched_.chunks), 0);
  const int64_t n = model_.activation_floats(B, T) * static_cast<int64_t>(sizeof(float));
  for (const Instr& in : sched_.per_stage[static_cast<size_t>(stage_)]) {
    const double t0 = now_seconds();
    std::string name;
    const char* cat = "compute";
    switch (in.kind) {
      case InstrKind::forward:
        name = run_forward_instr(in, batch, B, T, dloss, n);
        break;
      case InstrKind::backward:
        name = run_backward_instr(in, B, T, backwards_done);
        break;
      case InstrKind::send_act:
      case InstrKind::send_grad:
        name = run_send_instr(in, n);
        cat = "p2p";
        break;
      case InstrKind::recv_act:
      case InstrKind::recv_grad:
        name = run_recv_instr(in, n, t0);
        cat = "bubble";
        break;
      case InstrKind::reduce_grads:
        reduce_grads();
        name = "reduce_grads";
        cat = "comm";
        break;
      case InstrKind::optimizer_step:
        // The engine steps the optimizer once the global gradient norm is known.
        break;
      case InstrKind::weight_grad:
        name = run_weight_grad_instr(in, B, T, weight_grads_done);
        break;
    }
    if (trace_ != nullptr && !name.empty()) trace_->span(name, cat, t0, now_seconds(), in.mb, in.chunk);
  }
  step_ = now_seconds() - t_start;
}

void PipelineExecutor::run_forward(int micro_batches, const MicroBatchFn& batch, int64_t T,
                                   const std::function<bool(int mb)>& counted) {
  const int pp = sched_.stages;
  int next = 0;  // slots in turn, each free again once its send completed
  for (int mb = 0; mb < micro_batches; ++mb) {
    for (int c = 0; c < model_.chunks(); ++c) {
      const ChunkPlan& ch = model_.plan().chunks[static_cast<size_t>(c)];
      const int k = next;
      next = (next + 1) % model_.slots();
      SlotState& s = slots_[static_cast<size_t>(k)];
      TERA_ASSERT(s.mb == -1, "evaluation runs between training steps");
      wait_sends(s);
      const int64_t count = batch(mb, tokens_.data(), targets_.data());  // every stage knows the size
      const int64_t bytes = model_.activation_floats(count, T) * static_cast<int64_t>(sizeof(float));
      if (!ch.embedding) {
        Request r = g_.pp_dev->irecv(model_.input(c, k), bytes, peer_rank((stage_ + pp - 1) % pp), kEvalTag);
        g_.pp_dev->wait(r);
      }
      model_.forward(c, k, tokens_.data(), targets_.data(), count, T, 0.0f, false, counted(mb));
      if (!ch.head) s.sends.push_back(g_.pp_dev->isend(model_.output(c, k), bytes, peer_rank((stage_ + 1) % pp), kEvalTag));
    }
  }
  for (auto& s : slots_) wait_sends(s);
}

}  // namespace tera
