// The point-to-point routes of the pipeline executor (PipelineExecutor::
// message_route, ::routes): what a device communicator that matches messages
// by posting order (NCCL, comm/nccl_comm.cpp) opens one channel for. On every
// schedule of a sweep: each message the executor posts is on a route the list
// opens, and within a route the receiver posts in the order the sender sends,
// so order-matching within a route gives each receive its own message, as
// MPI's (source, tag) matching does.
#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <tuple>
#include <vector>

#include "parallel/pipeline.h"

namespace tera {
namespace {

using RouteKey = std::tuple<int, int, int>;
RouteKey key_of(const P2pRoute& r) { return {r.src, r.dst, r.tag}; }

void check_routes(const Schedule& s) {
  const std::vector<P2pRoute> routes = PipelineExecutor::routes(s);
  auto opened = [&](const P2pRoute& r) { return std::find(routes.begin(), routes.end(), r) != routes.end(); };
  for (size_t i = 0; i < routes.size(); ++i) {
    EXPECT_NE(routes[i].src, routes[i].dst);
    EXPECT_GE(std::min(routes[i].src, routes[i].dst), 0);
    EXPECT_LT(std::max(routes[i].src, routes[i].dst), s.stages);
    for (size_t j = 0; j < i; ++j) EXPECT_FALSE(routes[i] == routes[j]) << "route listed twice";
  }
  // Per route: the messages in the sender's posting order and in the
  // receiver's. The executor posts sends and activation receives at their
  // instructions and a gradient's receive at the forward of its micro-batch
  // (pipeline.h), so the receiver's order of a gradient route is its forwards'.
  std::map<RouteKey, std::vector<MessageKey>> sent, posted;
  const int V = s.virtual_stages();
  for (int st = 0; st < s.stages; ++st) {
    for (const Instr& in : s.per_stage[static_cast<size_t>(st)]) {
      const bool send = in.kind == InstrKind::send_act || in.kind == InstrKind::send_grad;
      const bool recv = in.kind == InstrKind::recv_act || in.kind == InstrKind::recv_grad;
      if (send || recv) {
        const P2pRoute r = PipelineExecutor::message_route(s, st, in);
        EXPECT_TRUE(opened(r)) << "stage " << st << ": a message on a route the list does not open";
        EXPECT_EQ(send ? r.src : r.dst, st);
        EXPECT_EQ(send ? r.dst : r.src, in.peer);
      }
      if (send) sent[key_of(PipelineExecutor::message_route(s, st, in))].push_back(message_key(s, st, in));
      if (in.kind == InstrKind::recv_act) posted[key_of(PipelineExecutor::message_route(s, st, in))].push_back(message_key(s, st, in));
      if (in.kind == InstrKind::forward && s.virtual_stage(st, in.chunk) < V - 1) {
        const Instr grad{InstrKind::recv_grad, in.mb, in.chunk, (st + 1) % s.stages};
        posted[key_of(PipelineExecutor::message_route(s, st, grad))].push_back(message_key(s, st, grad));
      }
    }
  }
  EXPECT_EQ(sent, posted) << "a route's receives are posted in another order than its sends";
  // Evaluation: each virtual stage but the last sends to the next stage.
  for (int st = 0; st < s.stages; ++st) {
    for (int c = 0; c < s.chunks; ++c) {
      if (s.virtual_stage(st, c) < V - 1) {
        const P2pRoute eval{st, (st + 1) % s.stages, 3};
        EXPECT_TRUE(opened(eval)) << "no evaluation route from stage " << st;
      }
    }
  }
  // Nothing else is opened: every route carries training or evaluation messages.
  size_t training = sent.size(), evaluation = 0;
  for (const P2pRoute& r : routes) evaluation += sent.count(key_of(r)) == 0 ? 1 : 0;
  EXPECT_EQ(training + evaluation, routes.size());
  EXPECT_LE(evaluation, static_cast<size_t>(s.stages));
}

TEST(PipelineRoutes, EveryMessageIsOnAnOpenedRouteInPostingOrder) {
  int schedules = 0;
  for (int stages = 2; stages <= 5; ++stages) {
    for (int M : {1, 2, 3, 4, 8, 10}) {
      for (ScheduleKind kind : {ScheduleKind::gpipe, ScheduleKind::one_f_one_b}) {
        auto s = make_schedule(kind, stages, M, 1);
        ASSERT_TRUE(s.ok()) << s.error();
        check_routes(*s);
        ++schedules;
      }
      for (int chunks : {2, 3}) {
        auto s = make_schedule(ScheduleKind::interleaved, stages, M, chunks);
        if (!s.ok()) continue;  // micro-batches not a multiple of the stages
        check_routes(*s);
        ++schedules;
      }
    }
  }
  EXPECT_GT(schedules, 50);
}

TEST(PipelineRoutes, OneFOneBOnFourStagesOpensThreeRoutesPerEdge) {
  auto s = make_schedule(ScheduleKind::one_f_one_b, 4, 8, 1);
  ASSERT_TRUE(s.ok());
  // Activations forward, gradients back (one tag per edge), evaluation forward.
  EXPECT_EQ(PipelineExecutor::routes(*s).size(), 9u);
  EXPECT_EQ(PipelineExecutor::message_route(*s, 2, {InstrKind::send_grad, 0, 0, 1}), (P2pRoute{2, 1, 16 + 1}));
  EXPECT_EQ(PipelineExecutor::message_route(*s, 1, {InstrKind::recv_grad, 0, 0, 2}), (P2pRoute{2, 1, 16 + 1}));
}

}  // namespace
}  // namespace tera
