// Config errors: each malformed input gives one message naming the key (and
// the fix where there is one). Exit codes are checked by the CLI tests.
#include <gtest/gtest.h>

#include <string>

#include "config/config.h"

namespace tera {
namespace {

const char* kGood = R"(
[model]
layers = 2
hidden = 32
heads = 4
seq_len = 16
vocab = 256
[train]
steps = 5
micro_batch = 2
global_batch = 4
[data]
train = "corpus.txt"
)";

std::string error_of(const std::string& text, std::vector<std::string> overrides = {}) {
  auto r = parse_run_config(text, "cfg.toml", overrides, /*check_files=*/false);
  return r.ok() ? "" : r.error();
}

void expect_error(const std::string& text, std::vector<std::string> overrides, std::vector<std::string> needles) {
  const std::string e = error_of(text, overrides);
  ASSERT_FALSE(e.empty()) << "expected an error";
  for (const auto& n : needles) EXPECT_NE(e.find(n), std::string::npos) << "'" << n << "' not in: " << e;
}

TEST(Config, GoodConfigParses) {
  auto r = parse_run_config(kGood, "cfg.toml", {}, false);
  ASSERT_TRUE(r.ok()) << r.error();
  EXPECT_EQ(r->model.layers, 2);
  EXPECT_EQ(r->accumulation(), 2);
  EXPECT_EQ(r->data.train, "corpus.txt");
}

TEST(Config, OverridesApplyWithTypes) {
  auto r = parse_run_config(kGood, "cfg.toml", {"train.steps=9", "train.lr=0.01", "data.train=other.txt", "out.dir=x"}, false);
  ASSERT_TRUE(r.ok()) << r.error();
  EXPECT_EQ(r->train.steps, 9);
  EXPECT_FLOAT_EQ(r->train.lr, 0.01f);
  EXPECT_EQ(r->data.train, "other.txt");
  EXPECT_EQ(r->out.dir, "x");
}

TEST(Config, BlendIsParsedAndChecked) {
  std::string blend = kGood;
  blend.replace(blend.find("train = \"corpus.txt\""), 20, "blend = [[0.3, \"A\"], [7, \"B\"]]\nval = \"v.txt\"");
  auto r = parse_run_config(blend, "cfg.toml", {}, false);
  ASSERT_TRUE(r.ok()) << r.error();
  ASSERT_EQ(r->data.blend.size(), 2u);
  EXPECT_EQ(r->data.blend[0], (std::pair<double, std::string>{0.3, "A"}));
  EXPECT_EQ(r->data.blend[1], (std::pair<double, std::string>{7.0, "B"}));
  auto again = parse_run_config(run_config_to_toml(*r), "saved.toml", {}, false);  // as a checkpoint stores it
  ASSERT_TRUE(again.ok()) << again.error();
  EXPECT_EQ(again->data.blend, r->data.blend);
  expect_error(blend, {"data.blend=[[0, \"A\"]]"}, {"cfg.toml", "data.blend[0]", "not positive"});
  expect_error(blend, {"data.blend=[[1, \"A\"], [-2, \"B\"]]"}, {"data.blend[1]", "not positive"});
  expect_error(blend, {"data.blend=[[\"A\", 1]]"}, {"data.blend", "[weight, \"prefix\"] pairs"});
  expect_error(blend, {"data.train=x.txt"}, {"data.train and data.blend are both set"});
  expect_error(blend, {"data.val="}, {"data.blend needs a data.val"});
}

TEST(Config, UnknownKeySuggestsTheNearest) {
  expect_error(kGood, {"train.stpes=3"}, {"cfg.toml", "unknown key 'train.stpes'", "did you mean 'train.steps'"});
  expect_error(std::string(kGood) + "[trian]\nsteps = 1\n", {}, {"unknown key 'trian.steps'"});
}

TEST(Config, WrongTypeNamesKeyAndTypes) {
  expect_error(kGood, {"train.steps=\"ten\""}, {"train.steps must be an integer, got a string"});
  expect_error(kGood, {"train.steps=2.5"}, {"train.steps must be an integer, got a float"});
  expect_error(kGood, {"train.lr=true"}, {"train.lr must be a number"});
  expect_error(kGood, {"data.train=[1, 2]"}, {"data.train must be a string, got an array"});
}

TEST(Config, ImpossibleValues) {
  expect_error(kGood, {"model.heads=5"}, {"model.heads = 5 does not divide model.hidden = 32"});
  expect_error(kGood, {"train.global_batch=5"},
               {"train.global_batch = 5 is not a multiple of train.micro_batch = 2", "such as 4"});
  expect_error(kGood, {"train.steps=0"}, {"train.steps = 0 must be positive"});
  expect_error(kGood, {"train.min_lr=1.0"}, {"train.min_lr"});
  expect_error(kGood, {"model.layers=-1"}, {"model.layers = -1 must be a positive integer"});
  expect_error(kGood, {"train.clip=-1"}, {"train.clip"});
  expect_error(kGood, {"train.beta2=1.0"}, {"train.beta2"});
}

TEST(Config, TensorParallelLayoutsTheModelCannotTake) {
  // hidden 32, heads 4, ffn 128, seq_len 16
  expect_error(kGood, {"parallel.tp=3"}, {"parallel.tp = 3 does not divide model.heads = 4"});
  expect_error(kGood, {"parallel.tp=8"}, {"parallel.tp = 8 does not divide model.heads = 4"});
  // (hidden = heads * head size, so a tp dividing heads divides hidden too.)
  expect_error(kGood, {"model.ffn_hidden=102", "parallel.tp=4"}, {"parallel.tp = 4 does not divide the MLP width"});
  expect_error(kGood, {"parallel.tp=4", "model.seq_len=18", "parallel.sequence_parallel=true"},
               {"model.seq_len = 18 divisible by parallel.tp = 4"});
  expect_error(kGood, {"parallel.zero=4"}, {"parallel.zero = 4 must be 0, 1, 2 or 3"});
  // An int key beyond int's range is refused, not wrapped (2^32 + 2 once read as tp = 2).
  expect_error(kGood, {"parallel.tp=4294967298"}, {"parallel.tp = 4294967298 is out of range"});
  expect_error(kGood, {"train.micro_batch=4294967298"}, {"train.micro_batch = 4294967298 is out of range"});
  // Every failing factor is listed, not only the first.
  expect_error(kGood, {"parallel.tp=3", "parallel.vpp=2"},
               {"parallel.tp = 3 does not divide model.heads = 4", "parallel.vpp = 2 needs parallel.schedule"});
  auto ok = parse_run_config(kGood, "cfg.toml", {"parallel.tp=4", "parallel.sequence_parallel=true", "parallel.zero=3"}, false);
  EXPECT_TRUE(ok.ok()) << ok.error();
}

TEST(Config, ContextParallelLayoutsTheModelCannotTake) {
  // seq_len 16: cp 2 and 4 split it into 4 and 8 chunks; 3 (6 chunks) does not, nor does an odd length.
  EXPECT_TRUE(parse_run_config(kGood, "cfg.toml", {"parallel.cp=2"}, false).ok());
  EXPECT_TRUE(parse_run_config(kGood, "cfg.toml", {"parallel.cp=4", "parallel.zero=3"}, false).ok());
  expect_error(kGood, {"parallel.cp=3"}, {"parallel.cp = 3 with model.seq_len = 16", "a multiple of 6", "change seq_len or cp"});
  expect_error(kGood, {"parallel.cp=2", "model.seq_len=17"}, {"parallel.cp = 2 with model.seq_len = 17", "a multiple of 4"});
  expect_error(kGood, {"parallel.cp=2", "model.seq_len=18"}, {"a multiple of 4"});
  expect_error(kGood, {"parallel.cp=0"}, {"cp = 0 must lie in [1, 4096]"});
  // The ring runs the flash kernels.
  expect_error(kGood, {"parallel.cp=2", "model.attention=\"naive\""},
               {"parallel.cp = 2 runs ring attention over the flash kernels", "model.attention = \"flash\""});
  // With sequence parallelism each tp rank holds a part of the cp share.
  expect_error(kGood, {"model.seq_len=20", "parallel.cp=2", "parallel.tp=4", "parallel.sequence_parallel=true"},
               {"model.seq_len / cp (2) = 10 divisible by parallel.tp = 4"});
}

TEST(Config, ZeroBubbleScheduleRunsWithoutRecompute) {
  EXPECT_TRUE(parse_run_config(kGood, "cfg.toml", {"parallel.pp=2", "parallel.schedule=\"zb-h1\""}, false).ok());
  // W reads each block's saved activations after B.
  expect_error(kGood, {"parallel.pp=2", "parallel.schedule=\"zb-h1\"", "train.recompute=\"full\""},
               {"parallel.schedule = \"zb-h1\" with train.recompute = \"full\"", "set train.recompute = \"none\""});
  // One model chunk per stage.
  expect_error(kGood, {"parallel.pp=2", "parallel.vpp=2", "parallel.schedule=\"zb-h1\""},
               {"parallel.vpp = 2 needs parallel.schedule = \"interleaved\""});
  expect_error(kGood, {"parallel.schedule=\"zbh1\""}, {"parallel.schedule = \"zbh1\" is not one of", "\"zb-h1\""});
  EXPECT_TRUE(parse_run_config(kGood, "cfg.toml", {"parallel.pp=2", "parallel.schedule=\"1f1b\""}, false).ok());
}

TEST(Config, PlannerOnlyShapesAreRefusedWithTheReason) {
  // Grouped-query attention runs; a gated MLP on a GPT-2 block is the planner's shape only.
  EXPECT_TRUE(parse_run_config(kGood, "cfg.toml", {"model.kv_heads=2"}, false).ok());
  const std::string g = error_of(kGood, {"model.mlp=\"gated\""});
  EXPECT_NE(g.find("model.mlp"), std::string::npos) << g;
  EXPECT_NE(error_of(kGood, {"model.mlp=\"swirly\""}).find("model.mlp"), std::string::npos);
}

TEST(Config, MissingRequiredKeys) {
  std::string no_layers = kGood;
  no_layers.replace(no_layers.find("layers = 2\n"), 11, "");
  expect_error(no_layers, {}, {"model.layers is missing"});
  std::string no_data = kGood;
  no_data.replace(no_data.find("[data]\ntrain = \"corpus.txt\"\n"), 27, "");
  expect_error(no_data, {}, {"data.train is missing"});
}

TEST(Config, SyntaxErrorHasLineAndColumn) {
  expect_error("[model]\nlayers = = 2\n", {}, {"cfg.toml:2:", "TOML syntax error"});
}

TEST(Config, BadOverrideSyntax) {
  expect_error(kGood, {"steps=3"}, {"--set 'steps=3'", "section.name"});
  expect_error(kGood, {"train.steps"}, {"expected section.key=value"});
}

TEST(Config, MissingDataFileIsReported) {
  auto r = parse_run_config(kGood, "cfg.toml", {"data.train=/nonexistent/corpus.txt"}, /*check_files=*/true);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.error().find("data.train = \"/nonexistent/corpus.txt\": no such file"), std::string::npos) << r.error();
}

TEST(Config, RoundTripsThroughToml) {
  auto r = parse_run_config(kGood, "cfg.toml", {"train.lr=0.003", "data.val=v.txt"}, false);
  ASSERT_TRUE(r.ok());
  auto again = parse_run_config(run_config_to_toml(*r), "emitted", {}, false);
  ASSERT_TRUE(again.ok()) << again.error();
  EXPECT_EQ(again->model, r->model);
  EXPECT_EQ(again->train.lr, r->train.lr);
  EXPECT_EQ(again->data.val, "v.txt");
}

// Llama 3.1's rope scaling: the keys set it, its numbers alone (or on GPT-2)
// are refused naming the key, bad values name their key, and it survives the
// TOML round trip as part of the model's identity.
TEST(Config, Llama3RopeScaling) {
  const std::vector<std::string> llama = {"model.arch=\"llama\"", "model.rope_scaling=\"llama3\""};
  auto r = parse_run_config(kGood, "cfg.toml", llama, false);
  ASSERT_TRUE(r.ok()) << r.error();
  EXPECT_TRUE(r->model.rope_scaling.llama3);
  EXPECT_EQ(r->model.rope().factor, 8);  // Llama 3.1's defaults
  EXPECT_EQ(r->model.rope().high_freq_factor, 4);
  EXPECT_EQ(r->model.rope().original_max_positions, 8192);
  std::vector<std::string> custom = llama;
  for (const char* kv : {"model.rope_factor=4", "model.rope_low_freq_factor=2", "model.rope_high_freq_factor=16",
                         "model.rope_original_seq_len=512"}) {
    custom.push_back(kv);
  }
  r = parse_run_config(kGood, "cfg.toml", custom, false);
  ASSERT_TRUE(r.ok()) << r.error();
  EXPECT_EQ(r->model.rope().factor, 4);
  EXPECT_EQ(r->model.rope().low_freq_factor, 2);
  EXPECT_EQ(r->model.rope().original_max_positions, 512);
  auto again = parse_run_config(run_config_to_toml(*r), "emitted", {}, false);
  ASSERT_TRUE(again.ok()) << again.error();
  EXPECT_EQ(again->model, r->model);
  ModelConfig other = r->model;
  other.rope_scaling.factor = 2;
  EXPECT_FALSE(other == r->model);  // the scaling is part of the model's identity
  other.rope_scaling.llama3 = false;
  EXPECT_EQ(other.rope().factor, 1);  // off: no scaling at all
  expect_error(kGood, {"model.arch=\"llama\"", "model.rope_factor=8"}, {"model.rope_factor", "model.rope_scaling = \"llama3\""});
  expect_error(kGood, {"model.rope_scaling=\"llama3\""}, {"model.rope_scaling", "llama"});
  expect_error(kGood, {"model.arch=\"llama\"", "model.rope_scaling=\"yarn\""}, {"model.rope_scaling = \"yarn\"", "llama3"});
  expect_error(kGood, {llama[0], llama[1], "model.rope_factor=0.5"}, {"model.rope_factor = 0.5"});
  expect_error(kGood, {llama[0], llama[1], "model.rope_high_freq_factor=1"}, {"model.rope_high_freq_factor", "low < high"});
  expect_error(kGood, {llama[0], llama[1], "model.rope_original_seq_len=0"}, {"model.rope_original_seq_len = 0"});
}

}  // namespace
}  // namespace tera
