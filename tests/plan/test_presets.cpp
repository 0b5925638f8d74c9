// Presets, layout strings and checks, and the Llama-style ModelSpec fields.
#include <gtest/gtest.h>

#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "plan/layout.h"
#include "plan/memory_model.h"
#include "partition/stage_plan.h"
#include "plan/presets.h"
#include "plan/stack_profile.h"

namespace tera {
namespace {

TEST(Presets, EveryShippedPresetLoads) {
  const auto clusters = list_presets("clusters");
  for (const char* want : {"frontier", "selene", "dgx-h100", "dgx-h200"}) {
    EXPECT_NE(std::find(clusters.begin(), clusters.end(), want), clusters.end()) << want;
  }
  for (const auto& n : clusters) EXPECT_TRUE(load_cluster(n).ok()) << n << ": " << load_cluster(n).error();
  const auto models = list_presets("models");
  for (const char* want : {"gpt2-124m", "gpt2-350m", "gpt2-774m", "gpt2-1.5b", "gpt3-175b", "frontier-22b",
                           "frontier-175b", "frontier-1t"}) {
    EXPECT_NE(std::find(models.begin(), models.end(), want), models.end()) << want;
  }
  for (const auto& n : models) EXPECT_TRUE(load_model(n).ok()) << n << ": " << load_model(n).error();
  // Known sizes: GPT-2 small 124,439,808; the Frontier 1T shape ~1.01T.
  EXPECT_EQ(ModelSpec(load_model("gpt2-124m").value()).num_params(), 124439808);
  EXPECT_NEAR(static_cast<double>(ModelSpec(load_model("frontier-1t").value()).num_params()), 1.008e12, 0.01e12);
  // The Llama presets are the published models to the parameter (arch llama:
  // no biases, no position table, untied head): the Hugging Face configs'
  // counts of meta-llama/Llama-2-7b-hf, Meta-Llama-3-8B and Llama-2-70b.
  for (const auto& [name, published] : std::vector<std::pair<std::string, int64_t>>{
           {"llama2-7b", 6738415616}, {"llama3-8b", 8030261248}, {"llama2-70b", 68976648192}}) {
    const auto m = load_model(name);
    ASSERT_TRUE(m.ok()) << name;
    EXPECT_EQ(m.value().arch, Arch::llama) << name;
    EXPECT_EQ(ModelSpec(m.value()).num_params(), published) << name;
  }
  const Cluster f = load_cluster("frontier").value();
  EXPECT_DOUBLE_EQ(f.gpu.peak_flops_16, 191.5e12);
  EXPECT_DOUBLE_EQ(f.node.inter_bw_per_gpu(), 4 * 25e9 / 8);
  EXPECT_EQ(f.node.package_gpus, 2);
}

TEST(Presets, ErrorsNameTheFileAndKey) {
  auto unknown = load_cluster("no-such-cluster");
  ASSERT_FALSE(unknown.ok());
  EXPECT_NE(unknown.error().find("selene"), std::string::npos);  // lists the presets
  const std::string base = "name = \"x\"\n[gpu]\nname = \"g\"\npeak_tflops_32 = 1\nmemory_gib = 8\nhbm_tb_s = 1\n"
                           "[node]\ngpus = 8\nintra_gb_s = 100\nnics = 1\nnic_gb_s = 10\n";
  ASSERT_TRUE(parse_cluster_toml(base, "x.toml").ok());
  auto typo = parse_cluster_toml(base + "[efficiency]\ngemm_maxx = 0.5\n", "x.toml");
  ASSERT_FALSE(typo.ok());
  EXPECT_NE(typo.error().find("x.toml"), std::string::npos);
  EXPECT_NE(typo.error().find("efficiency.gemm_maxx"), std::string::npos);
  auto range = parse_cluster_toml(base + "[efficiency]\ngemm_max = 1.5\n", "x.toml");
  ASSERT_FALSE(range.ok());
  EXPECT_NE(range.error().find("efficiency.gemm_max"), std::string::npos);
  auto missing = parse_cluster_toml("name = \"x\"\n[gpu]\nname = \"g\"\n", "y.toml");
  ASSERT_FALSE(missing.ok());
  EXPECT_NE(missing.error().find("gpu.peak_tflops_32"), std::string::npos);
  auto syntax = parse_cluster_toml("name = ", "z.toml");
  ASSERT_FALSE(syntax.ok());
  EXPECT_NE(syntax.error().find("z.toml:1"), std::string::npos);
  // Round trip through the writer `tera calibrate` uses.
  const Cluster s = load_cluster("selene").value();
  auto back = parse_cluster_toml(cluster_to_toml(s, "# test\n"), "rt.toml");
  ASSERT_TRUE(back.ok()) << back.error();
  EXPECT_NEAR(back->gpu.memory_bytes, s.gpu.memory_bytes, 1e3);
  EXPECT_NEAR(back->eff.gemm_max, s.eff.gemm_max, 1e-3);
  EXPECT_EQ(back->stack.flash_attention, s.stack.flash_attention);
}

TEST(Presets, PowerCapSetsTheTensorClock) {
  const std::string base = "name = \"x\"\n[gpu]\nname = \"g\"\npeak_tflops_32 = 1\nmemory_gib = 8\nhbm_tb_s = 1\n";
  const std::string node = "[node]\ngpus = 8\nintra_gb_s = 100\nnics = 1\nnic_gb_s = 10\n";
  // Uncapped by default, at full clock, and nothing of it written.
  const Cluster plain = parse_cluster_toml(base + node, "x.toml").value();
  EXPECT_FALSE(plain.gpu.power_capped());
  EXPECT_EQ(plain.eff.tensor_clock, 1);
  EXPECT_EQ(cluster_to_toml(plain, "").find("power_limit_w"), std::string::npos);
  EXPECT_EQ(cluster_to_toml(plain, "").find("tensor_clock"), std::string::npos);
  // Capped at 343 of 1000 W: dynamic power ~ f^3, so the clock is 0.343^(1/3) = 0.7.
  const std::string capped_gpu = base + "power_limit_w = 343\nboard_power_w = 1000\n";
  const Cluster capped = parse_cluster_toml(capped_gpu + node, "x.toml").value();
  EXPECT_TRUE(capped.gpu.power_capped());
  EXPECT_NEAR(capped.eff.tensor_clock, 0.7, 1e-12);
  const Cluster back = parse_cluster_toml(cluster_to_toml(capped, ""), "rt.toml").value();
  EXPECT_DOUBLE_EQ(back.gpu.power_limit_w, 343);
  EXPECT_NEAR(back.eff.tensor_clock, 0.7, 1e-12);
  EXPECT_EQ(cluster_to_toml(capped, "").find("tensor_clock"), std::string::npos);  // derived again on reading
  // A measured clock overrides the derived one, and is written back.
  const Cluster measured = parse_cluster_toml(capped_gpu + node + "[efficiency]\ntensor_clock = 0.8\n", "x.toml").value();
  EXPECT_NEAR(measured.eff.tensor_clock, 0.8, 1e-12);
  EXPECT_NEAR(parse_cluster_toml(cluster_to_toml(measured, ""), "rt.toml").value().eff.tensor_clock, 0.8, 1e-12);
  // A limit at or above the board's power is no cap.
  EXPECT_EQ(parse_cluster_toml(base + "power_limit_w = 700\nboard_power_w = 700\n" + node, "x.toml").value().eff.tensor_clock, 1);
  // One of the pair alone, or a clock out of (0, 1], names the file and the keys.
  auto half = parse_cluster_toml(base + "power_limit_w = 500\n" + node, "half.toml");
  ASSERT_FALSE(half.ok());
  EXPECT_NE(half.error().find("half.toml"), std::string::npos);
  EXPECT_NE(half.error().find("gpu.board_power_w"), std::string::npos);
  auto fast = parse_cluster_toml(base + node + "[efficiency]\ntensor_clock = 1.2\n", "fast.toml");
  ASSERT_FALSE(fast.ok());
  EXPECT_NE(fast.error().find("efficiency.tensor_clock"), std::string::npos);
  // The shipped capped board: torchtitan's 500 W Grand Teton H100.
  const Cluster gt = load_cluster("h100-hbm2e").value();
  EXPECT_TRUE(gt.gpu.power_capped());
  EXPECT_NEAR(gt.eff.tensor_clock, std::cbrt(500.0 / 700.0), 1e-12);
  for (const char* full : {"selene", "dgx-h100", "dgx-h200", "frontier"}) {
    EXPECT_EQ(load_cluster(full).value().eff.tensor_clock, 1) << full;
  }
}

TEST(Presets, SmCountAndGemmTile) {
  const std::string base = "name = \"x\"\n[gpu]\nname = \"g\"\npeak_tflops_32 = 1\nmemory_gib = 8\nhbm_tb_s = 1\n";
  const std::string node = "[node]\ngpus = 8\nintra_gb_s = 100\nnics = 1\nnic_gb_s = 10\n";
  // Unstated: no SM count (the smooth GEMM curve), nothing written.
  const Cluster plain = parse_cluster_toml(base + node, "x.toml").value();
  EXPECT_EQ(plain.gpu.sms, 0);
  EXPECT_EQ(cluster_to_toml(plain, "").find("sms"), std::string::npos);
  // Stated, with a tile: read and written back.
  const Cluster gpu =
      parse_cluster_toml(base + "sms = 132\n" + node + "[efficiency]\ngemm_tile_m = 64\ngemm_tile_n = 128\n", "x.toml").value();
  EXPECT_EQ(gpu.gpu.sms, 132);
  const Cluster back = parse_cluster_toml(cluster_to_toml(gpu, ""), "rt.toml").value();
  EXPECT_EQ(back.gpu.sms, 132);
  EXPECT_EQ(back.eff.gemm_tile_m, 64);
  EXPECT_EQ(back.eff.gemm_tile_n, 128);
  // Out of range: the file and the key named.
  auto bad = parse_cluster_toml(base + "sms = -1\n" + node, "bad.toml");
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.error().find("bad.toml"), std::string::npos);
  EXPECT_NE(bad.error().find("gpu.sms"), std::string::npos);
  auto tile = parse_cluster_toml(base + node + "[efficiency]\ngemm_tile_n = 0\n", "tile.toml");
  ASSERT_FALSE(tile.ok());
  EXPECT_NE(tile.error().find("efficiency.gemm_tile_n"), std::string::npos);
  // The shipped GPU presets carry their SM counts; the measured CPU preset none.
  EXPECT_EQ(load_cluster("selene").value().gpu.sms, 108);
  for (const char* h : {"dgx-h100", "dgx-h200", "h100-hbm2e"}) EXPECT_EQ(load_cluster(h).value().gpu.sms, 132) << h;
  EXPECT_EQ(load_cluster("frontier").value().gpu.sms, 110);
  EXPECT_EQ(load_cluster("local").value().gpu.sms, 0);
}

TEST(Presets, ZeroBubbleIsAStackFact) {
  // No shipped preset claims zero-bubble schedules; a preset may
  // (stack.zero_bubble), and the writer keeps it (and writes nothing when off).
  for (const auto& n : list_presets("clusters")) EXPECT_FALSE(load_cluster(n).value().stack.zero_bubble) << n;
  const std::string base = "name = \"x\"\n[gpu]\nname = \"g\"\npeak_tflops_32 = 1\nmemory_gib = 8\nhbm_tb_s = 1\n"
                           "[node]\ngpus = 8\nintra_gb_s = 100\nnics = 1\nnic_gb_s = 10\n";
  Cluster zb = parse_cluster_toml(base + "[stack]\nzero_bubble = true\n", "zb.toml").value();
  EXPECT_TRUE(zb.stack.zero_bubble);
  EXPECT_TRUE(parse_cluster_toml(cluster_to_toml(zb, ""), "rt.toml").value().stack.zero_bubble);
  EXPECT_EQ(cluster_to_toml(load_cluster("selene").value(), "").find("zero_bubble"), std::string::npos);
  // A profile says whether its stack has them: the stacks without a ZB-H1
  // turn it off; Megatron-DeepSpeed's opt-in and "preset" keep the preset's;
  // tera's runtime runs it (on a preset without it too).
  for (const auto& name : profile_names()) {
    const bool keeps = name == "megatron-deepspeed" || name == "preset" || name == "tera";
    EXPECT_EQ(apply_profile(zb, stack_profile(name).value()).stack.zero_bubble, keeps) << name;
  }
  EXPECT_TRUE(apply_profile(load_cluster("selene").value(), stack_profile("tera").value()).stack.zero_bubble);
}

TEST(Presets, ModelFilesAndRunConfigs) {
  auto m = parse_model_toml("[model]\nlayers = 2\nhidden = 64\nheads = 8\nkv_heads = 2\nmlp = \"gated\"\n"
                            "seq_len = 16\nvocab = 100\n[train]\nsteps = 3\n",
                            "run.toml");
  ASSERT_TRUE(m.ok()) << m.error();
  EXPECT_EQ(m->kv(), 2);
  EXPECT_EQ(m->mlp, MlpKind::gated);
  auto bad = parse_model_toml("[model]\nlayers = 2\nhidden = 64\nheads = 8\nseq_len = 16\nvocab = 100\nmlp = \"moe\"\n", "m.toml");
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.error().find("model.mlp"), std::string::npos);
  auto kv = parse_model_toml("[model]\nlayers = 2\nhidden = 64\nheads = 8\nkv_heads = 3\nseq_len = 16\nvocab = 100\n", "m.toml");
  ASSERT_FALSE(kv.ok());
  EXPECT_NE(kv.error().find("model.kv_heads"), std::string::npos);
}

TEST(Presets, TheUsersDirectoryComesBeforeTheShippedOne) {
  // tera calibrate writes <user dir>/clusters/local.toml; --cluster local then finds it first.
  namespace fs = std::filesystem;
  const fs::path xdg = fs::temp_directory_path() / ("tera-presets-" + std::to_string(::getpid()));
  fs::create_directories(xdg / "tera/clusters");
  std::ifstream shipped(fs::path(config_dir()) / "clusters/local.toml");
  std::stringstream text;
  text << shipped.rdbuf();
  std::string mine = text.str();
  const size_t at = mine.find("\nname = ");
  ASSERT_NE(at, std::string::npos);
  mine.replace(at, mine.find('\n', at + 1) - at, "\nname = \"measured here\"");
  std::ofstream(xdg / "tera/clusters/local.toml") << mine;
  std::ofstream(xdg / "tera/clusters/mine.toml") << mine;
  const char* old = std::getenv("XDG_CONFIG_HOME");
  const std::string saved = old ? old : "";
  ::setenv("XDG_CONFIG_HOME", xdg.c_str(), 1);
  EXPECT_EQ(user_config_dir(), (xdg / "tera").string());
  auto local = load_cluster("local");
  ASSERT_TRUE(local.ok()) << local.error();
  EXPECT_EQ(local->name, "measured here");
  const auto names = list_presets("clusters");
  EXPECT_EQ(std::count(names.begin(), names.end(), "local"), 1);  // listed once
  EXPECT_EQ(std::count(names.begin(), names.end(), "mine"), 1);
  EXPECT_EQ(std::count(names.begin(), names.end(), "frontier"), 1);
  auto none = load_cluster("nonesuch");
  ASSERT_FALSE(none.ok());
  EXPECT_NE(none.error().find((xdg / "tera/clusters").string()), std::string::npos) << none.error();
  if (old) ::setenv("XDG_CONFIG_HOME", saved.c_str(), 1); else ::unsetenv("XDG_CONFIG_HOME");
  fs::remove_all(xdg);
}

TEST(Layout, ParseAndCheckNameEveryFactor) {
  auto l = parse_layout("tp=2,pp=4,vpp=2,mb=1,zero=1,sp=1,recompute=selective", 16);
  ASSERT_TRUE(l.ok()) << l.error();
  EXPECT_EQ(l->dp, 2);
  EXPECT_EQ(l->schedule, ScheduleKind::interleaved);
  EXPECT_EQ(parse_layout(layout_string(*l), 0).value(), *l);
  EXPECT_FALSE(parse_layout("tp=2,bogus=1", 8).ok());
  EXPECT_FALSE(parse_layout("tp=3,pp=2", 16).ok());  // 6 does not divide 16
  const Workload w{ModelConfig{.layers = 8, .hidden = 64, .heads = 8, .seq_len = 32, .vocab = 100}, 16, Precision::bf16};
  ParallelLayout bad{2, 4, 3, 1, 1, 0, false, Recompute::none, ScheduleKind::one_f_one_b};
  EXPECT_NE(check_layout(bad, w, 16).message().find("parallel.tp (2) * parallel.pp (4) * parallel.dp (3) = 24 != world size 16"),
            std::string::npos);
  ParallelLayout heads{3, 1, 1, 1, 1, 0, false, Recompute::none, ScheduleKind::one_f_one_b};
  EXPECT_NE(check_layout(heads, w, 3).message().find("parallel.tp = 3 does not divide model.heads = 8"), std::string::npos);
  ParallelLayout batch{1, 1, 3, 1, 2, 0, false, Recompute::none, ScheduleKind::one_f_one_b};
  EXPECT_NE(check_layout(batch, w, 3).message().find("train.micro_batch (2) x data-parallel degree (3)"), std::string::npos);
  ParallelLayout inter{1, 4, 1, 2, 8, 0, false, Recompute::none, ScheduleKind::interleaved};
  EXPECT_NE(check_layout(inter, w, 4).message().find("micro_batches % stages"), std::string::npos);
}

TEST(Layout, PlannerTakesTheLayoutsTheRuntimeRuns) {
  // 7 layers over pp 2 x vpp 2 (the runtime splits them 2/2/2/1) and an
  // explicit uneven 1F1B split: refused by the planner before, priced now.
  const Workload w{ModelConfig{.layers = 7, .hidden = 64, .heads = 8, .seq_len = 32, .vocab = 100}, 16, Precision::bf16};
  ParallelLayout inter{1, 2, 1, 2, 1, 0, false, Recompute::none, ScheduleKind::interleaved};
  EXPECT_TRUE(check_layout(inter, w, 2).is_ok()) << check_layout(inter, w, 2).message();
  ParallelLayout uneven{1, 2, 1, 1, 1, 0, false, Recompute::none, ScheduleKind::one_f_one_b};
  uneven.stage_layers = {1, 6};
  EXPECT_TRUE(check_layout(uneven, w, 2).is_ok());
  EXPECT_EQ(layers_in_virtual_stage(uneven, 7, 1), 6);
  // Its pricing follows the split: the 6-layer stage holds more parameters
  // than the balanced 4-layer one, and the 1-layer stage fewer than 3.
  const ModelSpec spec(w.model);
  ParallelLayout balanced = uneven;
  balanced.stage_layers.clear();
  EXPECT_GT(stage_params(spec, uneven, 1), stage_params(spec, balanced, 1));
  EXPECT_LT(stage_params(spec, uneven, 0), stage_params(spec, balanced, 0));
  uneven.stage_layers = {3, 3};
  EXPECT_NE(check_layout(uneven, w, 2).message().find("parallel.stage_layers sums to 6 but model.layers = 7"),
            std::string::npos);
}

TEST(Layout, LayerSplitIsTheRuntimes) {
  for (int64_t L : {1, 7, 12, 96, 105}) {
    for (int pp : {1, 2, 3, 8}) {
      for (int vpp : {1, 2, 3}) {
        if (L < pp * vpp) continue;
        auto runtime = layers_per_virtual_stage(L, pp, vpp);
        ASSERT_TRUE(runtime.ok()) << runtime.error();
        ParallelLayout l;
        l.pp = pp;
        l.vpp = vpp;
        for (int v = 0; v < pp * vpp; ++v) {
          EXPECT_EQ(layers_in_virtual_stage(l, L, v), (*runtime)[static_cast<size_t>(v)]) << L << " " << pp << " " << vpp;
        }
      }
    }
  }
}

TEST(ModelSpecLlama, GroupedQueryAndGatedHandWorked) {
  // L=1, C=8, H=4, KV=2 (head size 2), F=16, gated, T=4, V=10 (no padding):
  // QKV width (4 + 2*2) * 2 = 16. Block: ln_1 16, c_attn 16*8+16 = 144,
  // c_proj 64+8 = 72, ln_2 16, c_fc 144, c_gate 144, c_proj 8*16+8 = 136 -> 672;
  // wte 80 + wpe 32 + ln_f 16, and the untied head of a gated shape 80 -> 880
  // in all. Forward FLOPs per token: layer
  // 2*(16*8 + 8*8 + 3*8*16) + 4*4*8 = 1280, head 2*8*10 = 160 -> 1440.
  const ModelConfig c{.layers = 1, .hidden = 8, .heads = 4, .seq_len = 4, .vocab = 10, .ffn_hidden = 16,
                      .vocab_align = 1, .kv_heads = 2, .mlp = MlpKind::gated};
  const ModelSpec spec(c);
  EXPECT_EQ(c.qkv_width(), 16);
  EXPECT_EQ(spec.num_params(), 880);
  EXPECT_FALSE(c.tied());
  EXPECT_DOUBLE_EQ(spec.forward_flops_per_token(), 1440.0);
  EXPECT_EQ(spec.qkv_width_local(2), 8);
  // Activations: qkv [B,T,16/tp], and the gate and SwiGLU product beside fch.
  int names = 0;
  for (const auto& b : spec.block_activations(1, 4, {.tp = 2})) {
    if (b.name == "qkv") {
      EXPECT_EQ(b.shape.back(), 8);
    }
    names += b.name == "fch_gate" || b.name == "fch_swiglu";
  }
  EXPECT_EQ(names, 2);
  // Llama 2 70B's weight matrices (80 layers, 8192, 64 heads, 8 KV, 28672 gated):
  // 80 * ((64+16)*128*8192 + 8192^2 + 3*8192*28672) = 68,451,041,280, which is
  // its published 68,976,648,192 less the two 32000 x 8192 embeddings and the norms.
  const ModelSpec l70(ModelConfig{.layers = 80, .hidden = 8192, .heads = 64, .seq_len = 4096, .vocab = 32000,
                                  .ffn_hidden = 28672, .vocab_align = 1, .kv_heads = 8, .mlp = MlpKind::gated});
  int64_t matrices = 0;
  for (const auto& p : l70.params()) {
    if (p.layer >= 0 && p.layer < 80 && p.shape.size() == 2) matrices += numel(p.shape);
  }
  EXPECT_EQ(matrices, 68451041280);
  EXPECT_EQ(68976648192 - 2 * 32000 * 8192 - (80 * 2 + 1) * 8192, matrices);
}

TEST(ModelSpecLlama, RuntimeRefusesWhatOnlyThePlannerKnows) {
  ModelConfig c{.layers = 1, .hidden = 8, .heads = 4, .seq_len = 4, .vocab = 10};
  EXPECT_TRUE(check_runtime_supports(c).is_ok());
  c.kv_heads = 4;  // = heads: plain multi-head attention
  EXPECT_TRUE(check_runtime_supports(c).is_ok());
  c.kv_heads = 2;  // grouped-query attention: the runtime's attention takes it
  EXPECT_TRUE(check_runtime_supports(c).is_ok());
  c.kv_heads = 0;
  c.mlp = MlpKind::gated;  // a gated MLP on a GPT-2 block: the planner's shape only
  EXPECT_NE(check_runtime_supports(c).message().find("model.mlp"), std::string::npos);
  c.arch = Arch::llama;  // Llama's block has it
  EXPECT_TRUE(check_runtime_supports(c).is_ok());
  // Defaults leave GPT-2 exactly as before: same model with kv_heads 0 or = heads.
  ModelConfig a{.layers = 1, .hidden = 8, .heads = 4, .seq_len = 4, .vocab = 10}, b = a;
  b.kv_heads = 4;
  EXPECT_TRUE(a == b);
}

}  // namespace
}  // namespace tera
