// RankMemory when the device runs out: the error names the class whose
// arena failed, the bytes it asked and the memory plan's prediction for the
// rank (class by class), so a user can compare it with `tera plan`.
#include <gtest/gtest.h>

#include <string>

#include "core/arena.h"
#include "kernels/backend.h"
#include "kernels/cpu/cpu_ops.h"
#include "partition/memory_plan.h"
#include "partition/rank_plan.h"
#include "model/model_spec.h"
#include "partition/param_table.h"
#include "model/rank_memory.h"

namespace tera {
namespace {

// A cpu backend whose device holds at most g_capacity bytes.
int64_t g_capacity = 0, g_used = 0;
void* capped_alloc(BackendContext*, int64_t bytes) {
  if (g_used + bytes > g_capacity) return nullptr;
  g_used += bytes;
  return cpu::alloc(bytes);
}

TEST(RankMemory, OutOfDeviceMemoryNamesTheClassTheBytesAndThePlan) {
  ModelConfig cfg{.layers = 2, .hidden = 32, .heads = 4, .seq_len = 16, .vocab = 100, .ffn_hidden = 0, .vocab_align = 64};
  ModelSpec spec(cfg);
  ParamTable table(spec);
  const MemoryPlan plan = resident_memory_plan(spec, table, 3, ActivationOptions{});
  int64_t total = 0;
  for (MemoryClass c : kAllMemoryClasses) total += plan.arena(c).total_bytes();
  const int64_t params = plan.arena(MemoryClass::parameters).total_bytes();
  const int64_t acts = plan.arena(MemoryClass::activations).total_bytes();
  ASSERT_GT(params, 0);
  ASSERT_GT(acts, 0);
  BackendOps ops = cpu_backend().ops();
  ops.alloc = capped_alloc;
  const Backend capped = cpu_backend().with_ops("capped", ops, nullptr);
  // Room for everything but the activations: every class before it fits.
  g_capacity = total - acts;
  g_used = 0;
  try {
    RankMemory rm(capped, plan);
    FAIL() << "the activations arena should not fit";
  } catch (const AllocationError& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find("capped memory ran out allocating the activations buffers"), std::string::npos) << what;
    EXPECT_NE(what.find("(" + std::to_string(acts) + " bytes) asked"), std::string::npos) << what;
    EXPECT_NE(what.find("tera plan"), std::string::npos) << what;
    EXPECT_NE(what.find("parameters "), std::string::npos) << what;  // the prediction, class by class
  }
  // With room for all of it, the same plan allocates.
  g_capacity = total;
  g_used = 0;
  RankMemory rm(capped, plan);
  EXPECT_EQ(rm.total(), total);
}

}  // namespace
}  // namespace tera
