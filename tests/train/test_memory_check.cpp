// The memory checked before allocation (train/memory_check.h) against what
// the engine really allocates, per rank and per class, over a sweep of
// layouts (tp, pp, vpp, dp, ZeRO 0-3, sequence parallel, recompute) of an
// odd-shaped model on the in-process world: equal, byte for byte.
#include <gtest/gtest.h>

#include "model/layout_check.h"

#include <omp.h>

#include <mutex>
#include <string>
#include <vector>

#include "comm/in_process_comm.h"
#include "comm/groups.h"
#include "train/engine.h"
#include "train/memory_check.h"

namespace tera {
namespace {

struct Case {
  int tp, pp, dp, vpp, zero;
  bool sp;
  Recompute recompute;
};

RunConfig config_for(const Case& c) {
  RunConfig cfg;
  cfg.model = ModelConfig{.layers = 4, .hidden = 24, .heads = 2, .seq_len = 12, .vocab = 67, .ffn_hidden = 0,
                          .vocab_align = 8};
  cfg.parallel.micro_batch = 2;
  cfg.train.global_batch = 8 * c.dp;
  cfg.parallel.tp = c.tp;
  cfg.parallel.pp = c.pp;
  cfg.parallel.dp = c.dp;
  cfg.parallel.vpp = c.vpp;
  cfg.parallel.schedule = c.vpp > 1 ? ScheduleKind::interleaved : ScheduleKind::one_f_one_b;
  cfg.parallel.zero = c.zero;
  cfg.parallel.sequence_parallel = c.sp;
  cfg.parallel.recompute = c.recompute;
  return cfg;
}

TEST(MemoryCheck, EstimateMatchesTheEngineAllocation) {
  std::vector<Case> cases;
  for (int zero = 0; zero <= 3; ++zero) {
    cases.push_back({1, 1, 1, 1, zero, false, Recompute::none});
    cases.push_back({1, 1, 2, 1, zero, false, Recompute::none});
    cases.push_back({2, 1, 2, 1, zero, true, Recompute::full});
    cases.push_back({1, 2, 2, 1, zero, false, Recompute::none});
    cases.push_back({2, 2, 1, 2, zero, false, Recompute::full});
    cases.push_back({2, 2, 2, 1, zero, true, Recompute::none});
    cases.push_back({1, 4, 1, 1, zero, false, Recompute::full});
  }
  for (const Case& c : cases) {
    const RunConfig cfg = config_for(c);
    const int world_size = c.tp * c.pp * c.dp;
    const Status checked = check_layout(cfg.parallel, cfg.model, cfg.train.global_batch, world_size);
    ASSERT_TRUE(checked.is_ok()) << checked.message();
    const ParallelLayout layout = with_world_size(cfg.parallel, world_size);
    std::mutex mu;
    InProcessWorld::run(layout.world(), [&](Communicator& world) {
      omp_set_num_threads(1);
      ProcessGroups groups(world, layout);
      Engine engine(cfg, cpu_backend(), groups.groups());
      const MemoryReport got = engine.memory();
      const RankMemoryEstimate est = estimate_rank_memory(cfg, layout, layout.coord(world.rank()));
      std::lock_guard<std::mutex> lock(mu);
      const std::string where = "tp " + std::to_string(c.tp) + " pp " + std::to_string(c.pp) + " dp " +
                                std::to_string(c.dp) + " vpp " + std::to_string(c.vpp) + " zero " +
                                std::to_string(c.zero) + " rank " + std::to_string(world.rank());
      EXPECT_EQ(est.params, got.params) << where;
      EXPECT_EQ(est.grads, got.grads) << where;
      EXPECT_EQ(est.optimizer, got.optimizer) << where;
      EXPECT_EQ(est.activations, got.activations) << where;
      EXPECT_EQ(est.workspace, got.workspace) << where;
    });
  }
}

}  // namespace
}  // namespace tera
