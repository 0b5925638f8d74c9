// Token shards: exact round trip in both token widths, and every corruption
// (magic, header, truncation, padding, checksum, token id >= vocab) refused
// with the file name and the problem; shard directories checked against
// their manifest.
#include <gtest/gtest.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>

#include "bpe_test_util.h"
#include "core/file_util.h"
#include "data/shard_dataset.h"
#include "data/shard_manifest.h"
#include "data/token_shard.h"

namespace tera {
namespace {

std::vector<uint8_t> slurp(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(f), std::istreambuf_iterator<char>()};
}
void spit(const std::string& path, const std::vector<uint8_t>& b) {
  std::ofstream(path, std::ios::binary)
      .write(reinterpret_cast<const char*>(b.data()), static_cast<std::streamsize>(b.size()));
}

std::vector<int32_t> ramp(int64_t n, int64_t vocab) {
  std::vector<int32_t> t(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) t[static_cast<size_t>(i)] = static_cast<int32_t>((i * 7919) % vocab);
  return t;
}

TEST(TokenShard, RoundTripsBothWidths) {
  for (const int64_t vocab : {int64_t{300}, int64_t{65536}, int64_t{65537}, int64_t{200000}}) {
    const auto tokens = ramp(5000, vocab);
    const std::string path = ::testing::TempDir() + "rt.tok";
    auto crc = write_shard(path, tokens.data(), 5000, vocab, 0xABCDu, static_cast<int32_t>(vocab - 1));
    ASSERT_TRUE(crc.ok()) << crc.error();
    auto s = TokenShard::open(path);
    ASSERT_TRUE(s.ok()) << s.error();
    EXPECT_EQ(s->header().token_bytes, vocab <= 65536 ? 2u : 4u);
    EXPECT_EQ(s->header().payload_crc32, *crc);
    EXPECT_EQ(s->header().tokenizer_fingerprint, 0xABCDu);
    EXPECT_EQ(std::filesystem::file_size(path), kShardHeaderBytes + 5000 * s->header().token_bytes);
    std::vector<int32_t> back(5000);
    s->read(0, 5000, back.data());
    EXPECT_EQ(back, tokens);
  }
  auto empty = write_shard(::testing::TempDir() + "empty.tok", nullptr, 0, 300, 1, -1);
  ASSERT_TRUE(empty.ok());
  EXPECT_EQ(TokenShard::open(::testing::TempDir() + "empty.tok")->size(), 0);
}

// Writes a valid shard, lets `corrupt` edit its bytes, and expects open() to fail with `needle`.
void expect_corrupt(const std::function<void(std::vector<uint8_t>&)>& corrupt, const std::string& needle) {
  const std::string path = ::testing::TempDir() + "corrupt.tok";
  const auto tokens = ramp(1000, 300);
  ASSERT_TRUE(write_shard(path, tokens.data(), 1000, 300, 7, 299).ok());
  auto bytes = slurp(path);
  corrupt(bytes);
  spit(path, bytes);
  auto s = TokenShard::open(path);
  ASSERT_FALSE(s.ok()) << needle;
  EXPECT_EQ(s.error().rfind(path + ": ", 0), 0u) << s.error();
  EXPECT_NE(s.error().find(needle), std::string::npos) << s.error();
  auto p = parse_shard(bytes.data(), bytes.size(), "mem");  // the fuzzed entry point agrees
  ASSERT_FALSE(p.ok());
}

void fix_header_crc(std::vector<uint8_t>& b) {
  const uint32_t c = crc32_of(b.data(), 60);
  std::memcpy(b.data() + 60, &c, 4);
}

TEST(TokenShard, CorruptionIsRefusedByName) {
  expect_corrupt([](auto& b) { b[0] = 'X'; }, "wrong magic");
  expect_corrupt([](auto& b) { b.erase(b.begin() + 40, b.end()); }, "shorter than the 64-byte shard header");
  expect_corrupt([](auto& b) { b[20] ^= 1; }, "header checksum mismatch");
  expect_corrupt([](auto& b) { b.erase(b.end() - 3, b.end()); }, "truncated");
  expect_corrupt(
      [](auto& b) {
        b.push_back(0);
        b.push_back(0);
      },
      "padded");
  expect_corrupt([](auto& b) { b[100] ^= 0x10; }, "checksum mismatch: the token payload is corrupt");
  expect_corrupt(
      [](auto& b) {
        b[8] = 9;
        fix_header_crc(b);
      },
      "unsupported shard version 9");
  expect_corrupt(
      [](auto& b) {
        b[12] = 4;
        fix_header_crc(b);
      },
      "token width 4 bytes does not match");
  expect_corrupt(
      [](auto& b) {  // a token of 400 >= vocab 300, with both checksums made consistent
        const uint16_t big = 400;
        std::memcpy(b.data() + 64 + 2 * 10, &big, 2);
        const uint32_t c = crc32_of(b.data() + 64, b.size() - 64);
        std::memcpy(b.data() + 40, &c, 4);
        fix_header_crc(b);
      },
      "token id 400 at position 10 is >= the vocabulary size 300");
  auto missing = TokenShard::open("/nonexistent/x.tok");
  ASSERT_FALSE(missing.ok());
  EXPECT_NE(missing.error().find("/nonexistent/x.tok: cannot open"), std::string::npos);
}

// A two-shard directory written by hand (tera tokenize encode's layout).
std::string make_dir(const std::string& name, const std::vector<int32_t>& a, const std::vector<int32_t>& b) {
  const std::string dir = ::testing::TempDir() + name;
  std::filesystem::create_directories(dir);
  ShardManifest m;
  m.tokenizer_fingerprint = 42;
  m.vocab_size = 300;
  SplitInfo& s = m.splits["train"];
  int i = 0;
  for (const auto* t : {&a, &b}) {
    const std::string file = "train-0000" + std::to_string(i++) + ".tok";
    auto crc = write_shard(dir + "/" + file, t->data(), static_cast<int64_t>(t->size()), 300, 42, -1);
    EXPECT_TRUE(crc.ok());
    s.shards.push_back({file, static_cast<int64_t>(t->size()), *crc});
    s.tokens += static_cast<int64_t>(t->size());
  }
  EXPECT_TRUE(write_manifest(dir, m).is_ok());
  return dir;
}

TEST(ShardDataset, ReadsAcrossShardsAndChecksTheManifest) {
  const auto a = ramp(100, 300), b = ramp(50, 299);
  const std::string dir = make_dir("two_shards", a, b);
  auto ds = ShardDataset::open(dir, "train");
  ASSERT_TRUE(ds.ok()) << ds.error();
  EXPECT_EQ((*ds)->num_tokens(), 150);
  EXPECT_EQ((*ds)->segments(), (std::vector<int64_t>{100, 50}));
  std::vector<int32_t> got(20);
  (*ds)->read(90, 20, got.data());
  std::vector<int32_t> want(a.begin() + 90, a.end());
  want.insert(want.end(), b.begin(), b.begin() + 10);
  EXPECT_EQ(got, want);
  EXPECT_FALSE(ShardDataset::open(dir, "val").ok());

  // A shard replaced by another valid shard: the manifest catches it.
  const auto c = ramp(100, 250);
  ASSERT_TRUE(write_shard(dir + "/train-00000.tok", c.data(), 100, 300, 42, -1).ok());
  auto swapped = ShardDataset::open(dir, "train");
  ASSERT_FALSE(swapped.ok());
  EXPECT_NE(swapped.error().find("train-00000.tok: does not match manifest.json"), std::string::npos)
      << swapped.error();

  auto no_manifest = ShardDataset::open(::testing::TempDir() + "nothing_here", "train");
  ASSERT_FALSE(no_manifest.ok());
  EXPECT_NE(no_manifest.error().find("not a token-shard directory"), std::string::npos) << no_manifest.error();
}

TEST(ShardManifest, MalformedManifestsAreRefused) {
  const std::string dir = make_dir("manifest_cases", ramp(10, 300), ramp(10, 300));
  const std::string path = dir + "/manifest.json";
  const auto good = slurp(path);
  const std::string text(good.begin(), good.end());
  for (const auto& [from, to, needle] : std::vector<std::tuple<std::string, std::string, std::string>>{
           {"\"version\": 1", "\"version\": 3", "unsupported manifest version 3"},
           {"\"tokens\": 20", "\"tokens\": 21", "its shards hold"},
           {"train-00001.tok", "../x.tok", "plain \"file\" name"},
           {"\"vocab_size\": 300", "\"vocab_size\": 0", "vocab_size"},
           {"\"tokenizer_fingerprint\": \"000000000000002a\"", "\"tokenizer_fingerprint\": 5", "16 hex digits"}}) {
    std::string t = text;
    const auto at = t.find(from);
    ASSERT_NE(at, std::string::npos) << from;
    t.replace(at, from.size(), to);
    spit(path, std::vector<uint8_t>(t.begin(), t.end()));
    auto m = read_manifest(dir);
    ASSERT_FALSE(m.ok()) << to;
    EXPECT_NE(m.error().find(needle), std::string::npos) << m.error();
    EXPECT_NE(m.error().find("manifest.json"), std::string::npos) << m.error();
  }
}

}  // namespace
}  // namespace tera
