// An optimizer update that would overflow the parameters is skipped like a
// non-finite gradient: the step reports it and the parameters stay as they
// were. train.lr is refused above 1 (config), so the step size that
// overflows is given to the engine directly.
#include <gtest/gtest.h>

#include <omp.h>

#include <cmath>
#include <vector>

#include "comm/groups.h"
#include "comm/in_process_comm.h"
#include "train/engine.h"

namespace tera {
namespace {

TEST(UpdateOverflow, IsSkippedAndLeavesTheParametersUnchanged) {
  RunConfig cfg;
  cfg.model = ModelConfig{.layers = 1, .hidden = 16, .heads = 2, .seq_len = 8, .vocab = 32, .ffn_hidden = 0,
                          .vocab_align = 8};
  cfg.parallel.micro_batch = 2;
  cfg.parallel.dp = 1;
  cfg.train.global_batch = 2;
  cfg.train.clip = 0;
  InProcessWorld::run(1, [&](Communicator& world) {
    omp_set_num_threads(1);
    ProcessGroups groups(world, cfg.parallel);
    Engine engine(cfg, cpu_backend(), groups.groups());
    engine.init_parameters(3);
    const BatchFn batch = [&](int64_t first, int64_t count, int32_t* tok, int32_t* tgt) {
      for (int64_t i = 0; i < count * cfg.model.seq_len; ++i) {
        tok[i] = static_cast<int32_t>((first * 7 + i) % cfg.model.vocab);
        tgt[i] = static_cast<int32_t>((first * 7 + i + 1) % cfg.model.vocab);
      }
    };
    const std::vector<float> before = engine.gather_parameters();
    const StepResult r = engine.train_step(0, 3e38f, batch);
    EXPECT_TRUE(r.skipped);
    EXPECT_TRUE(r.update_nonfinite);
    EXPECT_TRUE(std::isfinite(r.loss));
    EXPECT_EQ(engine.gather_parameters(), before);
    const StepResult ok = engine.train_step(1, 1e-3f, batch);  // a sane step still trains
    EXPECT_FALSE(ok.skipped);
    EXPECT_NE(engine.gather_parameters(), before);
  });
}

}  // namespace
}  // namespace tera
