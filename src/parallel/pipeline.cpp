// The pipeline executor: an interpreter of schedule.h's instruction lists.
#include "parallel/pipeline.h"

#include <fmt/format.h>

#include "core/check.h"
#include "core/timer.h"

namespace tera {

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

PipelineExecutor::PipelineExecutor(const Schedule& schedule, Gpt& model, ZeroMemory& zero, const Groups& groups,
                                   Trace* trace)
    : sched_(schedule), model_(model), zero_(zero), g_(groups), trace_(trace), stage_(groups.coord.pp) {
  TERA_ASSERT(schedule.stages == groups.layout.pp && model.chunks() == schedule.chunks);
  slots_.resize(static_cast<size_t>(model.chunks()));
  for (int c = 0; c < model.chunks(); ++c) slots_[static_cast<size_t>(c)].resize(static_cast<size_t>(model.slots(c)));
  const int64_t n = model.max_batch() * model.spec().config().seq_len;
  tokens_.resize(static_cast<size_t>(n));
  targets_.resize(static_cast<size_t>(n));
}

int PipelineExecutor::peer_rank(int stage) const { return stage; }

PipelineExecutor::SlotState& PipelineExecutor::slot_state(int c, int mb) {
  auto& v = slots_[static_cast<size_t>(c)];
  return v[static_cast<size_t>(mb) % v.size()];
}

void PipelineExecutor::wait_sends(SlotState& s) {
  for (auto& r : s.sends) g_.pp->wait(r);
  s.sends.clear();
}

void PipelineExecutor::reduce_grads() {
  for (auto& chunk : slots_)
    for (auto& s : chunk) wait_sends(s);
  zero_.finish_gradients();
  // Tied embedding: the first stage's wte (embedding) and the last stage's
  // (LM head) are one parameter; sum their gradients. The unit has the same
  // layout on both stages, so the dp chunks line up.
  if (g_.embedding != nullptr && model_.table().wte_unit() >= 0) {
    int64_t count = 0;
    float* g = zero_.reduced_grads(model_.table().wte_unit(), &count);
    g_.embedding->all_reduce(g, count, CommType::f32, ReduceOp::sum);
  }
}

double PipelineExecutor::run_step(const MicroBatchFn& batch, int64_t B, int64_t T, float dloss) {
  const double t_start = now_seconds();
  idle_ = 0;
  double loss = 0;
  std::vector<int> backwards_done(static_cast<size_t>(sched_.chunks), 0);
  const int64_t n = model_.activation_floats(B, T) * static_cast<int64_t>(sizeof(float));
  for (const Instr& in : sched_.per_stage[static_cast<size_t>(stage_)]) {
    const double t0 = now_seconds();
    std::string name;
    const char* cat = "compute";
    switch (in.kind) {
      case InstrKind::forward: {
        SlotState& s = slot_state(in.chunk, in.mb);
        TERA_ASSERT(s.mb == -1 || s.mb == in.mb, "pipeline slot still holds another micro-batch");
        wait_sends(s);
        s.mb = in.mb;
        const ChunkPlan& ch = model_.plan().chunks[static_cast<size_t>(in.chunk)];
        int64_t count = B;
        if (ch.embedding || ch.head) count = batch(in.mb, tokens_.data(), targets_.data());
        TERA_ASSERT(count == B, "training micro-batches are full");
        loss += model_.forward(in.chunk, in.mb % model_.slots(in.chunk), tokens_.data(), targets_.data(), B, T,
                               dloss, true);
        name = fmt::format("F{}.{}", in.mb, in.chunk);
        break;
      }
      case InstrKind::backward: {
        SlotState& s = slot_state(in.chunk, in.mb);
        TERA_ASSERT(s.mb == in.mb, "backward of a micro-batch whose forward did not run here");
        // ZeRO-0/1 reduce a unit's gradient once, after its last micro-batch.
        const size_t c = static_cast<size_t>(in.chunk);
        zero_.set_last_micro_batch(++backwards_done[c] == sched_.micro_batches);
        model_.backward(in.chunk, in.mb % model_.slots(in.chunk), B, T);
        s.mb = -1;
        name = fmt::format("B{}.{}", in.mb, in.chunk);
        break;
      }
      case InstrKind::send_act:
      case InstrKind::send_grad: {
        const bool grad = in.kind == InstrKind::send_grad;
        SlotState& s = slot_state(in.chunk, in.mb);
        const int k = in.mb % model_.slots(in.chunk);
        const float* buf = grad ? model_.grad_out(in.chunk, k) : model_.output(in.chunk, k);
        s.sends.push_back(g_.pp->isend(buf, n, peer_rank(in.peer), tag(grad)));
        name = fmt::format("s{}{}.{}>{}", grad ? 'G' : 'A', in.mb, in.chunk, in.peer);
        cat = "p2p";
        break;
      }
      case InstrKind::recv_act:
      case InstrKind::recv_grad: {
        const bool grad = in.kind == InstrKind::recv_grad;
        SlotState& s = slot_state(in.chunk, in.mb);
        const int k = in.mb % model_.slots(in.chunk);
        if (!grad) {
          TERA_ASSERT(s.mb == -1, "pipeline slot still holds another micro-batch");
          wait_sends(s);
        }
        float* buf = grad ? model_.grad_in(in.chunk, k) : model_.input(in.chunk, k);
        Request r = g_.pp->irecv(buf, n, peer_rank(in.peer), tag(grad));
        g_.pp->wait(r);
        idle_ += now_seconds() - t0;
        name = fmt::format("r{}{}.{}<{}", grad ? 'G' : 'A', in.mb, in.chunk, in.peer);
        cat = "bubble";
        break;
      }
      case InstrKind::reduce_grads:
        reduce_grads();
        name = "reduce_grads";
        cat = "comm";
        break;
      case InstrKind::optimizer_step:
        // The engine steps the optimizer once the global gradient norm is known.
        break;
    }
    if (trace_ != nullptr && !name.empty()) trace_->span(name, cat, t0, now_seconds(), in.mb, in.chunk);
  }
  step_ = now_seconds() - t_start;
  return loss;
}

std::vector<double> PipelineExecutor::run_forward(int micro_batches, const MicroBatchFn& batch, int64_t T) {
  constexpr int kEvalTag = 3;
  const int pp = sched_.stages;
  std::vector<double> loss(static_cast<size_t>(micro_batches), 0.0);
  for (int mb = 0; mb < micro_batches; ++mb) {
    for (int c = 0; c < model_.chunks(); ++c) {
      const ChunkPlan& ch = model_.plan().chunks[static_cast<size_t>(c)];
      SlotState& s = slots_[static_cast<size_t>(c)][0];
      wait_sends(s);
      const int64_t count = batch(mb, tokens_.data(), targets_.data());  // every stage knows the size
      const int64_t bytes = model_.activation_floats(count, T) * static_cast<int64_t>(sizeof(float));
      if (!ch.embedding) {
        Request r = g_.pp->irecv(model_.input(c, 0), bytes, peer_rank((stage_ + pp - 1) % pp), kEvalTag);
        g_.pp->wait(r);
      }
      loss[static_cast<size_t>(mb)] += model_.forward(c, 0, tokens_.data(), targets_.data(), count, T, 0.0f, false);
      if (!ch.head) s.sends.push_back(g_.pp->isend(model_.output(c, 0), bytes, peer_rank((stage_ + 1) % pp), kEvalTag));
    }
  }
  for (auto& chunk : slots_) wait_sends(chunk[0]);
  return loss;
}

}  // namespace tera
