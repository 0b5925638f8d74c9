// Pipeline schedule invariants over a sweep of (stages 1..8, micro-batches
// 1..16, chunks 1..4): every backward after its forward, every send matched
// by one receive in order, the promised in-flight bound, and no deadlock when
// a message-passing interpreter with the executor's semantics runs the lists.
// zb-h1 adds: one weight gradient per micro-batch after its backward on the
// same stage, the gradient messages sent by the backward (B) alone, and
// 1F1B's lists once its weight gradients are taken out.
#include <gtest/gtest.h>

#include <deque>
#include <map>
#include <set>
#include <tuple>

#include "partition/schedule.h"

namespace tera {
namespace {

bool is_send(InstrKind k) { return k == InstrKind::send_act || k == InstrKind::send_grad; }
bool is_recv(InstrKind k) { return k == InstrKind::recv_act || k == InstrKind::recv_grad; }
bool is_grad(InstrKind k) { return k == InstrKind::send_grad || k == InstrKind::recv_grad; }

// Runs every stage's list: compute and sends always proceed (sends buffer),
// a receive blocks until its channel (from, to, act|grad) has a message and
// must find the message it expects at the head. Returns "" on success, else
// what went wrong ("deadlock ...", "out of order ...").
std::string interpret(const Schedule& s) {
  using Channel = std::tuple<int, int, bool>;
  std::map<Channel, std::deque<MessageKey>> channels;
  std::vector<size_t> pc(static_cast<size_t>(s.stages), 0);
  size_t remaining = 0;
  for (const auto& list : s.per_stage) remaining += list.size();
  while (remaining > 0) {
    bool progressed = false;
    for (int st = 0; st < s.stages; ++st) {
      const auto& list = s.per_stage[static_cast<size_t>(st)];
      size_t& i = pc[static_cast<size_t>(st)];
      while (i < list.size()) {
        const Instr& in = list[i];
        if (is_send(in.kind)) {
          channels[{st, in.peer, is_grad(in.kind)}].push_back(message_key(s, st, in));
        } else if (is_recv(in.kind)) {
          auto& q = channels[{in.peer, st, is_grad(in.kind)}];
          if (q.empty()) break;
          if (!(q.front() == message_key(s, st, in))) {
            return "out of order receive on stage " + std::to_string(st) + " at instruction " + std::to_string(i);
          }
          q.pop_front();
        }
        ++i;
        --remaining;
        progressed = true;
      }
    }
    if (!progressed) {
      std::string where;
      for (int st = 0; st < s.stages; ++st) where += " stage " + std::to_string(st) + "@" + std::to_string(pc[static_cast<size_t>(st)]);
      return "deadlock:" + where;
    }
  }
  for (const auto& [ch, q] : channels) {
    if (!q.empty()) return "unreceived message on channel from " + std::to_string(std::get<0>(ch));
  }
  return "";
}

void check_invariants(const Schedule& s) {
  const int S = s.stages, M = s.micro_batches, C = s.chunks, V = s.virtual_stages();
  // Per stage: each (mb, chunk) forwards once, then backwards once; receives
  // sit right before the compute they feed, sends right after.
  for (int st = 0; st < S; ++st) {
    const auto& list = s.per_stage[static_cast<size_t>(st)];
    ASSERT_GE(list.size(), 2u);
    EXPECT_EQ(list[list.size() - 2].kind, InstrKind::reduce_grads);
    EXPECT_EQ(list.back().kind, InstrKind::optimizer_step);
    std::set<std::pair<int, int>> fwd, bwd, wgt;
    for (size_t i = 0; i < list.size(); ++i) {
      const Instr& in = list[i];
      const std::pair<int, int> unit{in.mb, in.chunk};
      const int v = s.virtual_stage(st, in.chunk);
      if (in.kind == InstrKind::forward) {
        EXPECT_TRUE(fwd.insert(unit).second) << "forward twice";
        EXPECT_EQ(v > 0, i > 0 && list[i - 1].kind == InstrKind::recv_act);
        EXPECT_EQ(v < V - 1, i + 1 < list.size() && list[i + 1].kind == InstrKind::send_act);
      } else if (in.kind == InstrKind::backward) {
        EXPECT_TRUE(fwd.count(unit)) << "backward before forward: stage " << st << " mb " << in.mb;
        EXPECT_TRUE(bwd.insert(unit).second) << "backward twice";
        EXPECT_EQ(v < V - 1, i > 0 && list[i - 1].kind == InstrKind::recv_grad);
        EXPECT_EQ(v > 0, i + 1 < list.size() && list[i + 1].kind == InstrKind::send_grad);
      } else if (in.kind == InstrKind::weight_grad) {
        EXPECT_TRUE(splits_backward(s.kind)) << "weight_grad in a fused-backward schedule";
        EXPECT_TRUE(bwd.count(unit)) << "weight_grad before its backward: stage " << st << " mb " << in.mb;
        EXPECT_TRUE(wgt.insert(unit).second) << "weight_grad twice";
        EXPECT_EQ(in.peer, -1);
      } else if (is_send(in.kind) || is_recv(in.kind)) {
        EXPECT_GE(in.peer, 0);
        EXPECT_LT(in.peer, S);
        // A gradient message carries what the backward just computed (B on
        // stage s waits for B on the next stage only, never for its W).
        if (in.kind == InstrKind::send_grad) {
          ASSERT_GT(i, 0u);
          EXPECT_EQ(list[i - 1], (Instr{InstrKind::backward, in.mb, in.chunk, -1})) << "stage " << st << " at " << i;
        }
      } else {
        EXPECT_EQ(in.peer, -1);
      }
    }
    EXPECT_EQ(fwd.size(), static_cast<size_t>(M * C));
    EXPECT_EQ(bwd.size(), static_cast<size_t>(M * C));
    EXPECT_EQ(wgt.size(), splits_backward(s.kind) ? static_cast<size_t>(M * C) : 0u);
    // In-flight bound as promised.
    const int promised = promised_in_flight(s.kind, S, M, C, st);
    EXPECT_LE(s.max_in_flight(st), promised) << "stage " << st;
    // The bound is tight: each schedule reaches what it promises.
    EXPECT_EQ(s.max_in_flight(st), promised) << "stage " << st;
    if (s.kind == ScheduleKind::gpipe) {
      EXPECT_EQ(s.max_in_flight(st), M);
    }
    if (s.kind == ScheduleKind::one_f_one_b) {
      EXPECT_LE(s.max_in_flight(st), S - st);
      EXPECT_EQ(s.max_in_flight(st), std::min(S - st, M));
    }
    if (s.kind == ScheduleKind::zb_h1) {
      // Every stage holds 1F1B's first stage's count, from F to W.
      EXPECT_LE(s.max_in_flight(st), S);
      EXPECT_EQ(s.max_in_flight(st), std::min(S, M));
      EXPECT_EQ(slots_per_chunk(s, st), std::vector<int>{std::min(S, M)});
    }
  }
  // Sends and receives: for every ordered pair and kind, the sequence of
  // messages sent equals the sequence received, in the same order.
  std::map<std::tuple<int, int, bool>, std::vector<MessageKey>> sent, received;
  for (int st = 0; st < S; ++st) {
    for (const Instr& in : s.per_stage[static_cast<size_t>(st)]) {
      if (is_send(in.kind)) sent[{st, in.peer, is_grad(in.kind)}].push_back(message_key(s, st, in));
      if (is_recv(in.kind)) received[{in.peer, st, is_grad(in.kind)}].push_back(message_key(s, st, in));
    }
  }
  EXPECT_EQ(sent, received);
  // Activations cross every edge once per micro-batch, gradients too.
  size_t messages = 0;
  for (const auto& [ch, keys] : sent) messages += keys.size();
  EXPECT_EQ(messages, static_cast<size_t>(2 * M * (V - 1)));
  EXPECT_EQ(interpret(s), "");
}

TEST(Schedule, SweepInvariants) {
  int checked = 0;
  for (ScheduleKind kind :
       {ScheduleKind::gpipe, ScheduleKind::one_f_one_b, ScheduleKind::interleaved, ScheduleKind::zb_h1}) {
    for (int S = 1; S <= 8; ++S) {
      for (int M = 1; M <= 16; ++M) {
        for (int C = 1; C <= 4; ++C) {
          const bool valid = kind == ScheduleKind::interleaved ? (S >= 2 && C >= 2 && M % S == 0) : C == 1;
          auto sch = make_schedule(kind, S, M, C);
          ASSERT_EQ(sch.ok(), valid) << schedule_kind_name(kind) << " S=" << S << " M=" << M << " C=" << C;
          if (!valid) continue;
          SCOPED_TRACE(std::string(schedule_kind_name(kind)) + " S=" + std::to_string(S) + " M=" +
                       std::to_string(M) + " C=" + std::to_string(C));
          check_invariants(*sch);
          ++checked;
          if (::testing::Test::HasFailure()) return;
        }
      }
    }
  }
  // gpipe, 1f1b and zb-h1: every (S, M) with one chunk; interleaved: 3 chunk counts x (M % S == 0) cases.
  EXPECT_EQ(checked, 3 * 8 * 16 + 3 * (8 + 5 + 4 + 3 + 2 + 2 + 2));
}

// ZB-H1 is 1F1B with the weight gradients moved: without them the lists
// (order of F and B, every send and receive) are 1F1B's, so the messages
// and their matching are unchanged.
TEST(Schedule, ZbH1IsOneFOneBWithWeightGradientsMoved) {
  for (int S : {2, 3, 4, 8}) {
    for (int M : {1, 2, 3, S - 1, S, S + 1, 2 * S, 3 * S + 1}) {
      if (M < 1) continue;
      SCOPED_TRACE("S=" + std::to_string(S) + " M=" + std::to_string(M));
      const Schedule zb = make_schedule(ScheduleKind::zb_h1, S, M, 1).value();
      const Schedule base = make_schedule(ScheduleKind::one_f_one_b, S, M, 1).value();
      check_invariants(zb);
      for (int st = 0; st < S; ++st) {
        std::vector<Instr> stripped;
        for (const Instr& in : zb.per_stage[static_cast<size_t>(st)]) {
          if (in.kind != InstrKind::weight_grad) stripped.push_back(in);
        }
        EXPECT_EQ(stripped, base.per_stage[static_cast<size_t>(st)]) << "stage " << st;
      }
      if (::testing::Test::HasFailure()) return;
    }
  }
}

// Stage s defers its Ws by s micro-batches: each W that follows a backward
// B(j) is W(j - s), so stage 0 runs F, B, W and the last stage waits S - 1
// micro-batches; the s Ws left run after the last backward.
TEST(Schedule, ZbH1DefersWeightGradientsByTheStage) {
  const int S = 4, M = 8;
  const Schedule zb = make_schedule(ScheduleKind::zb_h1, S, M, 1).value();
  for (int st = 0; st < S; ++st) {
    const Instr* prev = nullptr;  // the previous compute instruction
    int tail = 0;
    for (const Instr& in : zb.per_stage[static_cast<size_t>(st)]) {
      if (in.kind != InstrKind::forward && in.kind != InstrKind::backward && in.kind != InstrKind::weight_grad) continue;
      if (in.kind == InstrKind::weight_grad) {
        if (prev->kind == InstrKind::backward) {
          EXPECT_EQ(in.mb, prev->mb - st) << "stage " << st;
        } else {
          EXPECT_EQ(in.mb, M - st + tail++) << "stage " << st;
        }
      }
      prev = &in;
    }
    EXPECT_EQ(tail, st);
  }
}

TEST(Schedule, CompactFormZbH1) {
  // 2 stages, 3 micro-batches: stage 0 (no delay) runs each W right after its
  // B; stage 1 delays its Ws by one micro-batch and ends with the one left.
  auto s = make_schedule(ScheduleKind::zb_h1, 2, 3, 1);
  ASSERT_TRUE(s.ok());
  EXPECT_EQ(s->to_string(0),
            "0F0,sA0.0>1,1F0,sA1.0>1,rG0.0<1,0B0,0W0,2F0,sA2.0>1,rG1.0<1,1B0,1W0,rG2.0<1,2B0,2W0,RG,OPT");
  EXPECT_EQ(s->to_string(1),
            "rA0.0<0,0F0,0B0,sG0.0>0,rA1.0<0,1F0,1B0,sG1.0>0,0W0,rA2.0<0,2F0,2B0,sG2.0>0,1W0,2W0,RG,OPT");
  EXPECT_EQ(s->max_in_flight(0), 2);
  EXPECT_EQ(s->max_in_flight(1), 2);  // 1F1B's last stage: 1
}

TEST(Schedule, CompactFormOneFOneB) {
  // 2 stages, 3 micro-batches: stage 0 warms up with one forward.
  auto s = make_schedule(ScheduleKind::one_f_one_b, 2, 3, 1);
  ASSERT_TRUE(s.ok());
  EXPECT_EQ(s->to_string(0),
            "0F0,sA0.0>1,1F0,sA1.0>1,rG0.0<1,0B0,2F0,sA2.0>1,rG1.0<1,1B0,rG2.0<1,2B0,RG,OPT");
  EXPECT_EQ(s->to_string(1),
            "rA0.0<0,0F0,0B0,sG0.0>0,rA1.0<0,1F0,1B0,sG1.0>0,rA2.0<0,2F0,2B0,sG2.0>0,RG,OPT");
}

TEST(Schedule, CompactFormInterleaved) {
  // 2 stages, 2 micro-batches, 2 chunks: virtual stages 0,1 (chunk 0) and
  // 2,3 (chunk 1). Stage 1 warms up with (2-1-1)*2 + 1*2 = 2 forwards, stage 0 with 4 = all.
  auto s = make_schedule(ScheduleKind::interleaved, 2, 2, 2);
  ASSERT_TRUE(s.ok());
  EXPECT_EQ(s->to_string(0),
            "0F0,sA0.0>1,1F0,sA1.0>1,rA0.1<1,0F1,sA0.1>1,rA1.1<1,1F1,sA1.1>1,"
            "rG0.1<1,0B1,sG0.1>1,rG1.1<1,1B1,sG1.1>1,rG0.0<1,0B0,rG1.0<1,1B0,RG,OPT");
  EXPECT_EQ(s->to_string(1),
            "rA0.0<0,0F0,sA0.0>0,rA1.0<0,1F0,sA1.0>0,rA0.1<0,0F1,0B1,sG0.1>0,rA1.1<0,1F1,1B1,sG1.1>0,"
            "rG0.0<0,0B0,sG0.0>0,rG1.0<0,1B0,sG1.0>0,RG,OPT");
  EXPECT_EQ(s->max_in_flight(0), 4);
  EXPECT_EQ(s->max_in_flight(1), 3);
}

TEST(Schedule, InterpreterCatchesDeadlockAndDisorder) {
  // The checker must be able to fail: stage 1 receiving mb 1 before mb 0 is
  // out of order; a stage waiting for a gradient nobody sent yet deadlocks.
  auto s = make_schedule(ScheduleKind::gpipe, 2, 2, 1);
  ASSERT_TRUE(s.ok());
  Schedule swapped = *s;
  std::swap(swapped.per_stage[1][0].mb, swapped.per_stage[1][3].mb);
  EXPECT_NE(interpret(swapped).find("out of order"), std::string::npos);
  Schedule stuck = *s;
  auto& st0 = stuck.per_stage[0];
  st0.insert(st0.begin(), Instr{InstrKind::recv_grad, 0, 0, 1});
  EXPECT_NE(interpret(stuck).find("deadlock"), std::string::npos);
}

TEST(Schedule, ErrorsNameTheFactor) {
  auto a = make_schedule(ScheduleKind::interleaved, 4, 6, 2);
  ASSERT_FALSE(a.ok());
  EXPECT_NE(a.error().find("micro_batches % stages"), std::string::npos);
  auto b = make_schedule(ScheduleKind::interleaved, 4, 8, 1);
  ASSERT_FALSE(b.ok());
  EXPECT_NE(b.error().find("chunks >= 2"), std::string::npos);
  auto c = make_schedule(ScheduleKind::one_f_one_b, 4, 8, 2);
  ASSERT_FALSE(c.ok());
  EXPECT_NE(c.error().find("chunks = 2"), std::string::npos);
  auto z = make_schedule(ScheduleKind::zb_h1, 4, 8, 2);
  ASSERT_FALSE(z.ok());
  EXPECT_NE(z.error().find("zb-h1 schedule has one model chunk per stage, got chunks = 2"), std::string::npos);
  EXPECT_EQ(parse_schedule_kind("zb-h1").value(), ScheduleKind::zb_h1);
  EXPECT_STREQ(schedule_kind_name(ScheduleKind::zb_h1), "zb-h1");
  EXPECT_NE(parse_schedule_kind("zbh1").error().find("zb-h1"), std::string::npos);
  EXPECT_FALSE(make_schedule(ScheduleKind::gpipe, 0, 8, 1).ok());
  EXPECT_EQ(parse_schedule_kind("1f1b").value(), ScheduleKind::one_f_one_b);
  EXPECT_FALSE(parse_schedule_kind("pipedream").ok());
}

}  // namespace
}  // namespace tera
