// Byte dataset (raw-bytes mode) and evaluation windows: bytes as tokens,
// fractions that partition the file, windows in file order, clear errors.
// The training loader is tested in test_token_loader.cpp.
#include <gtest/gtest.h>

#include <cstdio>
#include <fstream>
#include <string>

#include "data/dataset.h"

namespace tera {
namespace {

std::string write_temp(const std::string& name, const std::string& text) {
  const std::string path = ::testing::TempDir() + name;
  std::ofstream(path, std::ios::binary) << text;
  return path;
}

TEST(ByteDataset, ReadsBytesAsTokens) {
  const std::string p = write_temp("bytes.txt", std::string("ab\xff\x00z", 5));
  auto ds = ByteDataset::open(p);
  ASSERT_TRUE(ds.ok()) << ds.error();
  ASSERT_EQ((*ds)->num_tokens(), 5);
  int32_t out[5];
  (*ds)->read(0, 5, out);
  EXPECT_EQ(out[0], 'a');
  EXPECT_EQ(out[2], 255);
  EXPECT_EQ(out[3], 0);
}

TEST(ByteDataset, SplitFractionsPartitionTheFile) {
  std::string text(1000, 'x');
  for (int i = 0; i < 1000; ++i) text[i] = static_cast<char>('a' + i % 26);
  const std::string p = write_temp("split.txt", text);
  auto tr = ByteDataset::open(p, 0.0, 0.9);
  auto va = ByteDataset::open(p, 0.9, 1.0);
  ASSERT_TRUE(tr.ok() && va.ok());
  EXPECT_EQ((*tr)->num_tokens() + (*va)->num_tokens(), 1000);
  int32_t first_val;
  (*va)->read(0, 1, &first_val);
  EXPECT_EQ(first_val, 'a' + 900 % 26);
}

TEST(ByteDataset, MissingFileNamesIt) {
  auto ds = ByteDataset::open("/nonexistent/file.txt");
  ASSERT_FALSE(ds.ok());
  EXPECT_NE(ds.error().find("/nonexistent/file.txt"), std::string::npos);
}

TEST(DatasetFits, TooShortForSeqLen) {
  auto ds = ByteDataset::open(write_temp("short.txt", "0123456789"));
  ASSERT_TRUE(ds.ok());
  EXPECT_TRUE(check_dataset_fits(**ds, 9, "data.train").is_ok());
  Status s = check_dataset_fits(**ds, 10, "data.train = \"short.txt\"");
  ASSERT_FALSE(s.is_ok());
  EXPECT_NE(s.message().find("fewer than model.seq_len + 1 = 11"), std::string::npos) << s.message();
}

TEST(SequentialWindows, CoverTheFileInOrder) {
  auto ds = ByteDataset::open(write_temp("seq.txt", "abcdefghijklmnopqrstu"));  // 21 bytes
  ASSERT_TRUE(ds.ok());
  std::vector<int32_t> tok(4 * 5), tgt(4 * 5);
  fill_sequential_windows(**ds, 5, 0, 4, tok.data(), tgt.data());
  EXPECT_EQ(tok[0], 'a');
  EXPECT_EQ(tok[5], 'f');
  EXPECT_EQ(tgt[19], 'u');
  EXPECT_EQ(tok[15], 'p');
}

}  // namespace
}  // namespace tera
