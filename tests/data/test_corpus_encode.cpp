// Corpus encoding into shards (independent of threads and chunk size, exact
// decode, held-out tails, stale shards removed) and open_training_data in
// each of its modes, with the errors that name the key, the file and the fix.
#include <gtest/gtest.h>

#include <filesystem>

#include "bpe_test_util.h"
#include "data/corpus_encode.h"
#include "data/shard_dataset.h"
#include "data/tokenizer_file.h"
#include "data/training_data.h"

namespace tera {
namespace {

namespace fs = std::filesystem;
using namespace testing_util;

std::vector<int32_t> all_tokens(const TokenDataset& d) {
  std::vector<int32_t> t(static_cast<size_t>(d.num_tokens()));
  d.read(0, d.num_tokens(), t.data());
  return t;
}

struct Corpus {
  std::vector<std::string> files;
  std::vector<std::string> texts;
};

Corpus make_corpus() {
  Corpus c;
  c.texts = {english_like(21, 4000), "", "no trailing newline", english_like(22, 50) + random_bytes(22, 300),
             std::string(5000, ' ') + "x", std::string(20000, 'x')};  // the last has no safe split
  for (size_t i = 0; i < c.texts.size(); ++i)
    c.files.push_back(write_file("doc" + std::to_string(i) + ".txt", c.texts[i]));
  return c;
}

TEST(EncodeCorpus, ShardsDoNotDependOnThreadsOrChunks) {
  const Corpus c = make_corpus();
  const BpeTokenizer tok = small_tokenizer();
  std::vector<uint32_t> crcs[2];
  for (int v = 0; v < 2; ++v) {
    EncodeOptions o;
    o.threads = v == 0 ? 1 : 3;
    o.chunk_bytes = v == 0 ? size_t{1} << 20 : 64;
    o.shard_tokens = 777;
    auto m = encode_to_shards(c.files, tok, ::testing::TempDir() + "enc" + std::to_string(v), o);
    ASSERT_TRUE(m.ok()) << m.error();
    for (const auto& e : m->splits.at("train").shards) crcs[v].push_back(e.crc32);
    EXPECT_EQ(m->splits.at("train").documents, 5);  // the empty file is no document
    EXPECT_EQ(m->splits.count("val"), 0u);
  }
  EXPECT_GT(crcs[0].size(), 3u);
  EXPECT_EQ(crcs[0], crcs[1]);
  // Decoding the shards gives the files back, concatenated; EOT closes each document.
  auto ds = ShardDataset::open(::testing::TempDir() + "enc1", "train");
  ASSERT_TRUE(ds.ok()) << ds.error();
  const auto t = all_tokens(**ds);
  std::string joined;
  for (const auto& x : c.texts) joined += x;
  EXPECT_EQ(tok.decode(t), joined);
  EXPECT_EQ(t.back(), tok.eot());
  EXPECT_EQ(std::count(t.begin(), t.end(), tok.eot()), 5);
}

TEST(EncodeCorpus, HeldOutTailsSplitAtAPieceBoundary) {
  const std::string text = english_like(31, 3000);
  const std::string f = write_file("one.txt", text);
  const BpeTokenizer tok = small_tokenizer();
  EncodeOptions o;
  o.val_fraction = 0.2;
  o.threads = 2;
  const std::string dir = ::testing::TempDir() + "heldout";
  auto m = encode_to_shards({f}, tok, dir, o);
  ASSERT_TRUE(m.ok()) << m.error();
  auto tr = ShardDataset::open(dir, "train");
  auto va = ShardDataset::open(dir, "val");
  ASSERT_TRUE(tr.ok() && va.ok());
  const std::string a = tok.decode(all_tokens(**tr)), b = tok.decode(all_tokens(**va));
  EXPECT_EQ(a + b, text);
  EXPECT_NEAR(static_cast<double>(b.size()) / static_cast<double>(text.size()), 0.2, 0.01);
  std::vector<int32_t> head = all_tokens(**tr);
  head.pop_back();                 // the EOT closing the head
  EXPECT_EQ(head, tok.encode(a));  // the cut did not change how the head encodes
  EXPECT_EQ(m->splits.at("val").bytes, static_cast<int64_t>(b.size()));

  // Re-encoding into the same directory with bigger shards removes the old ones.
  o.shard_tokens = 100;
  ASSERT_TRUE(encode_to_shards({f}, tok, dir, o).ok());
  const auto many = std::distance(fs::directory_iterator(dir), fs::directory_iterator{});
  o.shard_tokens = int64_t{1} << 20;
  ASSERT_TRUE(encode_to_shards({f}, tok, dir, o).ok());
  const auto few = std::distance(fs::directory_iterator(dir), fs::directory_iterator{});
  EXPECT_EQ(few, 4);  // manifest, tokenizer, one train and one val shard
  EXPECT_GT(many, few);
}

TrainingDataOptions config_for(const std::string& train, int64_t vocab, int64_t seq_len = 16) {
  TrainingDataOptions c;
  c.source = "run.toml";
  c.seq_len = seq_len;
  c.vocab = vocab;
  c.seed = 1234;  // RunConfig's default train.seed
  c.train = train;
  c.val_fraction = 0.1;
  return c;
}

TEST(OpenTrainingData, EveryModeRecordsItsTokenizer) {
  const std::string text = english_like(41, 4000);
  const std::string f = write_file("train.txt", text);
  const BpeTokenizer tok = small_tokenizer();
  const std::string tok_path = ::testing::TempDir() + "train_tok.json";
  ASSERT_TRUE(save_tokenizer(tok, tok_path).is_ok());

  auto bytes = open_training_data(config_for(f, 256));  // raw-bytes mode
  ASSERT_TRUE(bytes.ok()) << bytes.error();
  EXPECT_EQ(bytes->tokenizer, "bytes");
  EXPECT_EQ(bytes->train->vocab(), 256);

  TrainingDataOptions in_memory = config_for(f, tok.vocab_size());
  in_memory.tokenizer = tok_path;
  auto mem = open_training_data(in_memory);
  ASSERT_TRUE(mem.ok()) << mem.error();
  EXPECT_EQ(tok.decode(all_tokens(*mem->train)) + tok.decode(all_tokens(*mem->val)), text);
  auto recorded = tokenizer_from_reference(mem->tokenizer, "", "ckpt");
  ASSERT_TRUE(recorded.ok());
  EXPECT_EQ(recorded->fingerprint(), tok.fingerprint());

  EncodeOptions o;
  o.val_fraction = 0.1;
  const std::string dir = ::testing::TempDir() + "run_shards";
  ASSERT_TRUE(encode_to_shards({f}, tok, dir, o).ok());
  auto shards = open_training_data(config_for(dir, tok.vocab_size()));
  ASSERT_TRUE(shards.ok()) << shards.error();
  EXPECT_EQ(all_tokens(*shards->train), all_tokens(*mem->train));  // same tokens as in memory
  EXPECT_EQ(all_tokens(*shards->val), all_tokens(*mem->val));
  std::vector<int32_t> a(4 * 16), b(4 * 16), t(4 * 16);
  shards->sampler->fill(8, 4, a.data(), t.data());
  mem->sampler->fill(8, 4, b.data(), t.data());
  EXPECT_EQ(a, b);

  o.val_fraction = 0;
  const std::string dir2 = ::testing::TempDir() + "run_shards_noval";
  ASSERT_TRUE(encode_to_shards({f}, tok, dir2, o).ok());
  auto held = open_training_data(config_for(dir2, tok.vocab_size()));
  ASSERT_TRUE(held.ok()) << held.error();
  // One EOT fewer: the held-out tail is cut from the tokens, not encoded as its own document.
  EXPECT_EQ(held->train->num_tokens() + held->val->num_tokens() + 1,
            shards->train->num_tokens() + shards->val->num_tokens());
}

TEST(OpenTrainingData, ErrorsNameTheKeyAndTheFix) {
  const std::string f = write_file("train2.txt", english_like(42, 3000));
  const BpeTokenizer tok = small_tokenizer();
  const std::string dir = ::testing::TempDir() + "err_shards";
  ASSERT_TRUE(encode_to_shards({f}, tok, dir, EncodeOptions{}).ok());
  auto small_vocab = open_training_data(config_for(dir, 256));
  ASSERT_FALSE(small_vocab.ok());
  EXPECT_NE(small_vocab.error().find("model.vocab = 256 is smaller than the data's vocabulary (600 tokens); set "
                                     "model.vocab >= 600"),
            std::string::npos)
      << small_vocab.error();
  auto too_long = open_training_data(config_for(dir, 1024, 100000));
  ASSERT_FALSE(too_long.ok());
  EXPECT_NE(too_long.error().find("fewer than model.seq_len + 1"), std::string::npos) << too_long.error();

  const std::string other = ::testing::TempDir() + "other_tok.json";
  ASSERT_TRUE(save_tokenizer(small_tokenizer(500), other).is_ok());
  TrainingDataOptions mismatch = config_for(dir, 1024);
  mismatch.tokenizer = other;
  auto m = open_training_data(mismatch);
  ASSERT_FALSE(m.ok());
  EXPECT_NE(m.error().find("data.tokenizer = \"" + other + "\" is not the tokenizer"), std::string::npos) << m.error();

  const std::string bare = ::testing::TempDir() + "bare_dir";
  fs::create_directories(bare);
  auto no_manifest = open_training_data(config_for(bare, 1024));
  ASSERT_FALSE(no_manifest.ok());
  EXPECT_NE(no_manifest.error().find("not a token-shard directory"), std::string::npos) << no_manifest.error();
}

}  // namespace
}  // namespace tera
