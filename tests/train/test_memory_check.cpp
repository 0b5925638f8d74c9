// One memory plan (DESIGN.md invariant 2), checked end to end: for a sweep of
// layouts (tp, pp, vpp and uneven stage_layers, dp, ZeRO 0-3, sequence
// parallelism, recompute, all three schedules) of an odd-shaped model, every
// rank of the in-process world builds its engine on a backend that records
// each allocation, and
//   the planner's bytes for that rank (plan/memory_model.h, the path `tera
//   plan` prices layouts by: cached unit shapes, table bytes, schedule slots)
//   == the sizes the backend was asked for, class by class, in class order,
//   with no other allocation
//   == the memory check's estimate before allocation (train/memory_check.h)
//   == the engine's own report;
// exactly, byte for byte. The planner reports tensor-parallel rank 0; every
// tp rank is checked against it (all hold the same shapes).
#include <gtest/gtest.h>

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <omp.h>

#include <cstdio>
#include <mutex>
#include <string>
#include <vector>

#include "comm/groups.h"
#include "comm/in_process_comm.h"
#include "partition/layout_check.h"
#include "plan/memory_model.h"
#include "plan/stack_profile.h"
#include "train/engine.h"
#include "train/memory_check.h"

namespace tera {
namespace {

struct Case {
  int tp, pp, dp, vpp, zero;
  bool sp;
  Recompute recompute;
  ScheduleKind schedule = ScheduleKind::one_f_one_b;
  std::vector<int64_t> stage_layers = {};
  AttentionKind attention = AttentionKind::naive;
  bool llama = false;
  DType precision = DType::f32;  // train.precision
  int cp = 1;                    // context parallelism (the ring's buffers in the workspace)
};

std::string describe(const Case& c) {
  std::string s = fmt::format("tp {} pp {} dp {} vpp {} zero {}{} {} {} {}", c.tp, c.pp, c.dp, c.vpp, c.zero,
                              c.sp ? " sp" : "", recompute_name(c.recompute),
                              schedule_kind_name(c.vpp > 1 ? ScheduleKind::interleaved : c.schedule),
                              attention_kind_name(c.attention));
  if (c.llama) s += " llama";
  if (c.precision == DType::bf16) s += " bf16";
  if (c.cp > 1) s += fmt::format(" cp {}", c.cp);
  if (!c.stage_layers.empty()) s += fmt::format(" stage_layers {}", fmt::join(c.stage_layers, " "));
  return s;
}

RunConfig config_for(const Case& c) {
  RunConfig cfg;
  // Odd shapes: head size 6, vocabulary 67 (not a multiple of 8 * tp), 6 layers.
  cfg.model = ModelConfig{.layers = 6, .hidden = 24, .heads = 4, .seq_len = 12, .vocab = 67, .ffn_hidden = 0,
                          .vocab_align = 8};
  cfg.parallel.micro_batch = 2;
  cfg.train.global_batch = int64_t{2} * c.dp * 2 * c.pp;  // 2 pp micro-batches per replica
  cfg.parallel.tp = c.tp;
  cfg.parallel.pp = c.pp;
  cfg.parallel.dp = c.dp;
  cfg.parallel.cp = c.cp;
  cfg.parallel.vpp = c.vpp;
  cfg.parallel.schedule = c.vpp > 1 ? ScheduleKind::interleaved : c.schedule;
  cfg.parallel.zero = c.zero;
  cfg.parallel.sequence_parallel = c.sp;
  cfg.parallel.recompute = c.recompute;
  cfg.parallel.stage_layers = c.stage_layers;
  cfg.model.attention = c.attention;
  cfg.train.precision = c.precision;
  if (c.llama) {  // the same with Llama's block: 2 key/value heads, SwiGLU width 40, untied head
    cfg.model.arch = Arch::llama;
    cfg.model.mlp = MlpKind::gated;
    cfg.model.kv_heads = 2;
    cfg.model.ffn_hidden = 40;
  }
  return cfg;
}

std::vector<Case> sweep() {
  std::vector<Case> cases;
  const Recompute none = Recompute::none, full = Recompute::full;
  for (int zero = 0; zero <= 3; ++zero) {
    cases.push_back({1, 1, 1, 1, zero, false, none});
    cases.push_back({1, 1, 2, 1, zero, false, full});
    cases.push_back({2, 1, 2, 1, zero, true, full});
    cases.push_back({2, 1, 1, 1, zero, false, none});
    cases.push_back({1, 2, 2, 1, zero, false, none});
    cases.push_back({1, 2, 2, 1, zero, false, none, ScheduleKind::gpipe});
    cases.push_back({2, 2, 1, 2, zero, false, full});
    cases.push_back({2, 2, 2, 1, zero, true, none});
    cases.push_back({1, 3, 1, 1, zero, false, full});
    cases.push_back({1, 2, 1, 3, zero, false, none});
    cases.push_back({1, 2, 2, 1, zero, false, none, ScheduleKind::one_f_one_b, {4, 2}});
    cases.push_back({2, 2, 1, 2, zero, true, full, ScheduleKind::interleaved, {2, 1, 1, 2}});
  }
  cases.push_back({4, 1, 1, 1, 0, true, none});
  cases.push_back({4, 1, 2, 1, 3, false, full});
  cases.push_back({1, 3, 2, 2, 2, false, full});
  cases.push_back({2, 3, 1, 1, 1, true, none, ScheduleKind::gpipe});
  // Flash attention: the row log-sum-exp instead of the probabilities.
  const AttentionKind flash = AttentionKind::flash;
  for (int zero : {0, 3}) {
    cases.push_back({1, 1, 1, 1, zero, false, none, ScheduleKind::one_f_one_b, {}, flash});
    cases.push_back({2, 2, 2, 1, zero, true, full, ScheduleKind::one_f_one_b, {}, flash});
    cases.push_back({1, 2, 1, 3, zero, false, none, ScheduleKind::interleaved, {}, flash});
  }
  // Llama: no biases or position table, RMSNorm keeps no mean, an untied head
  // on the last stage, grouped key/value heads.
  cases.push_back({1, 1, 1, 1, 0, false, none, ScheduleKind::one_f_one_b, {}, flash, true});
  cases.push_back({2, 2, 2, 1, 3, true, full, ScheduleKind::one_f_one_b, {}, flash, true});
  cases.push_back({1, 2, 2, 3, 1, false, none, ScheduleKind::interleaved, {}, flash, true});
  cases.push_back({2, 1, 2, 1, 2, false, none, ScheduleKind::one_f_one_b, {}, AttentionKind::naive, true});
  cases.push_back({1, 3, 1, 1, 1, false, full, ScheduleKind::gpipe, {}, flash, true});
  cases.push_back({2, 3, 1, 1, 0, true, none, ScheduleKind::gpipe, {1, 3, 2}, flash, true});
  // tp 4 over 2 key/value heads: each head replicated on 2 ranks.
  cases.push_back({4, 1, 2, 1, 3, true, full, ScheduleKind::one_f_one_b, {}, flash, true});
  cases.push_back({4, 2, 1, 1, 1, false, none, ScheduleKind::one_f_one_b, {}, AttentionKind::naive, true});
  // bf16 GEMMs: the bf16 copy of the weights (gathered units' twins under
  // ZeRO-3) and the cast workspace, every ZeRO stage.
  const DType bf16 = DType::bf16;
  for (int zero = 0; zero <= 3; ++zero) {
    cases.push_back({2, 2, 2, 1, zero, zero % 2 == 1, full, ScheduleKind::one_f_one_b, {}, flash, false, bf16});
  }
  cases.push_back({1, 1, 1, 1, 0, false, none, ScheduleKind::one_f_one_b, {}, AttentionKind::naive, false, bf16});
  cases.push_back({1, 2, 2, 3, 3, false, none, ScheduleKind::interleaved, {}, flash, true, bf16});
  cases.push_back({4, 1, 2, 1, 1, true, full, ScheduleKind::one_f_one_b, {}, flash, true, bf16});
  // Context parallelism: each rank's share of the sequence, the ring's K/V
  // buffers and positions (and the fp32 staging under bf16 GEMMs), ZeRO
  // over dp * cp.
  const DType f32 = DType::f32;
  cases.push_back({1, 1, 1, 1, 0, false, none, ScheduleKind::one_f_one_b, {}, flash, false, f32, 2});
  cases.push_back({2, 1, 1, 1, 1, true, full, ScheduleKind::one_f_one_b, {}, flash, true, f32, 2});
  cases.push_back({1, 2, 2, 1, 3, false, none, ScheduleKind::one_f_one_b, {}, flash, false, bf16, 2});
  cases.push_back({1, 1, 1, 1, 2, false, full, ScheduleKind::one_f_one_b, {}, flash, true, bf16, 3});
  // zb-h1: slots held until W, each with the blocks' kept output gradients.
  const ScheduleKind zb = ScheduleKind::zb_h1;
  cases.push_back({1, 2, 2, 1, 0, false, none, zb});
  cases.push_back({2, 3, 1, 1, 3, true, none, zb, {}, flash, true});
  cases.push_back({1, 2, 2, 1, 2, false, none, zb, {3, 3}, flash, false, bf16});
  cases.push_back({2, 2, 1, 1, 1, true, none, zb, {}, flash, true, bf16, 2});
  return cases;
}

// A backend that records the size of every allocation the calling thread (one
// in-process rank) asks for.
thread_local std::vector<int64_t>* t_allocations = nullptr;
void* recording_alloc(BackendContext*, int64_t bytes) {
  if (t_allocations != nullptr) t_allocations->push_back(bytes);
  return cpu_backend().alloc(bytes);
}
const Backend& recording_backend() {
  static const Backend b = [] {
    BackendOps ops = cpu_backend().ops();
    ops.alloc = recording_alloc;
    return cpu_backend().with_ops("cpu-recording", ops, nullptr);
  }();
  return b;
}

// The planner's view of the run as `tera plan --stack tera --precision P`
// prices it (the words parsed as the command parses them): tera's stack, its
// attention, no allowances.
Cluster runtime_cluster(AttentionKind attention) {
  Cluster cl;
  auto profile = stack_profile("tera");
  EXPECT_TRUE(profile.ok());
  cl = apply_profile(cl, *profile);
  cl.stack.flash_attention = attention == AttentionKind::flash;
  cl.memory.fragmentation = 0;
  cl.memory.reserved_bytes = 0;
  return cl;
}

Precision planner_precision(DType precision) {
  auto p = parse_precision(precision == DType::bf16 ? "bf16" : "fp32");
  EXPECT_TRUE(p.ok());
  return *p;
}

TEST(MemoryPlan, PlannerEqualsWhatTheRuntimeAllocatesPerRankAndClass) {
  const std::vector<Case> cases = sweep();
  std::printf("bytes of rank 0 by class: parameters gradients optimizer zero_staging comm_buckets zero_gather "
              "activations workspace\n");
  ASSERT_GE(cases.size(), 40u);
  int ranks_checked = 0;
  for (const Case& c : cases) {
    const RunConfig cfg = config_for(c);
    const int world_size = c.tp * c.pp * c.dp * c.cp;
    const Status checked = check_layout(cfg.parallel, cfg.model, cfg.train.global_batch, world_size);
    ASSERT_TRUE(checked.is_ok()) << describe(c) << ": " << checked.message();
    const ParallelLayout layout = with_world_size(cfg.parallel, world_size);
    const ModelSpec spec(cfg.model);
    const Workload w{cfg.model, cfg.train.global_batch, planner_precision(c.precision)};
    MemoryTables planner(spec, w, runtime_cluster(c.attention));
    std::mutex mu;
    InProcessWorld::run(layout.world(), [&](Communicator& world) {
      omp_set_num_threads(1);
      ProcessGroups groups(world, layout, static_cast<int>(spec.kv_replicas(layout.tp)));
      std::vector<int64_t> allocations;
      t_allocations = &allocations;
      MemoryReport got;
      {
        Engine engine(cfg, recording_backend(), groups.groups());
        got = engine.memory();
      }
      t_allocations = nullptr;
      const ParallelLayout::Coord coord = layout.coord(world.rank());
      const MemoryReport est = estimate_rank_memory(cfg, layout, coord);
      std::lock_guard<std::mutex> lock(mu);
      const MemoryReport plan = planner.rank_plan(layout, coord.pp, coord.dp * layout.cp + coord.cp);
      const std::string where = describe(c) + ", rank " + std::to_string(world.rank());
      std::vector<int64_t> want;
      for (MemoryClass k : kAllMemoryClasses) {
        EXPECT_EQ(plan[k], est[k]) << where << ": " << memory_class_name(k) << " (planner vs memory check)";
        EXPECT_EQ(plan[k], got[k]) << where << ": " << memory_class_name(k) << " (planner vs engine)";
        if (plan[k] > 0) want.push_back(plan[k]);
      }
      EXPECT_EQ(allocations, want) << where << ": the allocations the backend saw, in class order";
      if (world.rank() == 0) {  // the comparison's record: rank 0 of every layout
        std::printf("%s: %s (= planner, %d ranks checked)\n", describe(c).c_str(),
                    fmt::format("{}", fmt::join(got.bytes, " ")).c_str(), layout.world());
      }
      ++ranks_checked;
    });
  }
  EXPECT_GT(ranks_checked, 150);
}

}  // namespace
}  // namespace tera
