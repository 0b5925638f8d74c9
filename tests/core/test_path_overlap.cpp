// core/path_overlap.h: an output that is an input (same path, hard link,
// symbolic link, a file of an input directory) or lies in an entry a
// directory output replaces is refused naming both; outputs that overlap
// each other too; the entries a directory output does not touch are free.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <string>

#include "core/path_overlap.h"
#include "temp_dir_test.h"

namespace tera {
namespace {

namespace fs = std::filesystem;

class PathOverlap : public TempDirTest {
 protected:
  void SetUp() override {
    TempDirTest::SetUp();
    fs::create_directories(dir_ / "shards");
    std::ofstream(path("run.toml")) << "[model]\n";
    std::ofstream(path("shards/train-00000.tok")) << "tokens";
  }
  // The message of refusing `outputs` against `inputs` ("" when accepted).
  static std::string refusal(const std::vector<OutputPath>& outputs, const std::vector<InputPath>& inputs) {
    const Status s = refuse_overlapping_paths(outputs, inputs);
    return s.is_ok() ? "" : s.message();
  }
};

TEST_F(PathOverlap, AFileOutputThatIsAnInputIsRefusedHoweverItIsNamed) {
  fs::create_hard_link(path("run.toml"), path("hard.toml"));
  fs::create_symlink(path("run.toml"), path("soft.toml"));
  const std::vector<InputPath> in = {{path("run.toml"), "--config"}};
  for (const char* name : {"run.toml", "hard.toml", "soft.toml"}) {
    const std::string m = refusal({{path(name), "--metrics", {}}}, in);
    EXPECT_NE(m.find("--metrics " + path(name)), std::string::npos) << m;
    EXPECT_NE(m.find("--config " + path("run.toml")), std::string::npos) << m;
  }
  EXPECT_EQ(refusal({{path("new.jsonl"), "--metrics", {}}}, in), "");
  EXPECT_EQ(refusal({{"", "--trace", {}}}, in), "");
}

TEST_F(PathOverlap, AFileOfAnInputDirectoryIsAnInput) {
  const std::vector<InputPath> in = {{path("shards"), "data.train"}};
  const std::string m = refusal({{path("shards/train-00000.tok"), "--trace", {}}}, in);
  EXPECT_NE(m.find("part of data.train"), std::string::npos) << m;
  EXPECT_EQ(refusal({{path("shards/new.json"), "--trace", {}}}, in), "");  // a new file beside them
}

TEST_F(PathOverlap, ADirectoryOutputRefusesInputsInTheEntriesItReplaces) {
  fs::create_directories(dir_ / "out" / "final");
  std::ofstream(path("out/final/model.safetensors")) << "w";
  std::ofstream(path("out/corpus.txt")) << "text";
  const OutputPath out{path("out"), "out.dir", {"final", "final.tmp.*"}};
  const std::string m = refusal({out}, {{path("out/final/model.safetensors"), "ckpt.init"}});
  EXPECT_NE(m.find(path("out/final") + " holds ckpt.init"), std::string::npos) << m;
  EXPECT_NE(refusal({out}, {{path("out/final.tmp.77/x"), "ckpt.init"}}), "");
  EXPECT_EQ(refusal({out}, {{path("out/corpus.txt"), "data.train"}}), "");  // not an entry it writes
  // Through a symbolic link from elsewhere.
  fs::create_symlink(path("out/final"), path("alias"));
  EXPECT_NE(refusal({out}, {{path("alias/model.safetensors"), "ckpt.init"}}), "");
  // "*": all of it.
  EXPECT_NE(refusal({{path("out"), "--out", {"*"}}}, {{path("out/corpus.txt"), "--input"}}), "");
}

TEST_F(PathOverlap, OutputsThatOverlapAreRefused) {
  const OutputPath out{path("out"), "out.dir", {"final"}};
  const OutputPath ck_inside{path("out/final/ck"), "ckpt.dir", {"step-*", "latest"}};
  std::string m = refusal({out, ck_inside}, {});
  EXPECT_NE(m.find("overlap"), std::string::npos) << m;
  EXPECT_NE(m.find("inside " + path("out/final")), std::string::npos) << m;
  // out.dir inside a checkpoint, and a trace inside a checkpoint.
  EXPECT_NE(refusal({{path("ck/step-00000004/out"), "out.dir", {"final"}}, {path("ck"), "ckpt.dir", {"step-*"}}}, {}),
            "");
  EXPECT_NE(refusal({{path("ck/step-00000004/t.json"), "--trace", {}}, {path("ck"), "ckpt.dir", {"step-*"}}}, {}), "");
  // The same file twice.
  EXPECT_NE(refusal({{path("m.jsonl"), "--metrics", {}}, {path("m.jsonl"), "--trace", {}}}, {}), "");
  // Allowed: one directory for both (each writes its own entries), the
  // checkpoints beside the final weights.
  EXPECT_EQ(refusal({out, {path("out"), "ckpt.dir", {"step-*"}}}, {}), "");
  EXPECT_EQ(refusal({out, {path("out/checkpoints"), "ckpt.dir", {"step-*"}}}, {}), "");
}

TEST(EntryMatches, ExactPrefixAndAll) {
  EXPECT_TRUE(entry_matches("final", "final"));
  EXPECT_FALSE(entry_matches("final2", "final"));
  EXPECT_TRUE(entry_matches("step-00000004", "step-*"));
  EXPECT_FALSE(entry_matches("latest", "step-*"));
  EXPECT_TRUE(entry_matches("anything", "*"));
}

}  // namespace
}  // namespace tera
