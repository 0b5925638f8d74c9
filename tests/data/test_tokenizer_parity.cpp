// Tokenizer parity: tera, loading tokenizer.json files and a tiktoken rank
// file, must give exactly the token ids of Hugging Face's JavaScript
// tokenizers and of js-tiktoken on a varied corpus, and decode them back.
// Run by tokenizer_parity.py, which installs the references and writes
// their ids (tokenizer_reference/reference.mjs).
// Usage: test_tokenizer_parity WORK_DIR [gtest flags]
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <string>

#include "core/file_util.h"
#include "data/tokenizer_file.h"

namespace tera {
namespace {

std::string g_work;

// What tera is told beside the rank file (--pattern, --special): cl100k's
// pattern and special tokens, and <|begin_of_text|> at cl100k's unused 100256.
const TokenizerSpec kCl100k{"cl100k_base.tiktoken", "cl100k",
                            "<|begin_of_text|>=100256,<|endoftext|>=100257,<|fim_prefix|>=100258,"
                            "<|fim_middle|>=100259,<|fim_suffix|>=100260,<|endofprompt|>=100276"};

nlohmann::json read_json(const std::string& path) {
  auto bytes = read_file(path);
  EXPECT_TRUE(bytes.ok()) << bytes.error();
  return nlohmann::json::parse(bytes->begin(), bytes->end());
}

TEST(TokenizerParity, IdsEqualTheReferenceImplementations) {
  const auto texts = read_json(g_work + "/corpus.json").get<std::vector<std::string>>();
  const auto ref = read_json(g_work + "/reference_ids.json");
  ASSERT_GT(texts.size(), 300u);
  ASSERT_GE(ref.size(), 5u);  // four tokenizer.json files and the rank file
  for (const auto& [name, ids] : ref.items()) {
    SCOPED_TRACE(name);
    TokenizerSpec spec{g_work + "/" + name, "", ""};
    if (name == kCl100k.path) spec = {g_work + "/" + name, kCl100k.pattern, kCl100k.specials};
    auto tok = open_tokenizer(spec);
    ASSERT_TRUE(tok.ok()) << tok.error();
    ASSERT_EQ(ids.size(), texts.size());
    size_t mismatches = 0, tokens = 0;
    EncodeCache cache;
    for (size_t i = 0; i < texts.size(); ++i) {
      const auto want = ids[i].get<std::vector<int32_t>>();
      std::vector<int32_t> got;
      if (tok->bos() >= 0) got.push_back(tok->bos());  // Hugging Face's template (add_special_tokens)
      tok->encode(texts[i], got, cache);
      tokens += want.size();
      if (got != want && ++mismatches <= 5) {
        ADD_FAILURE() << "text " << nlohmann::json(texts[i]).dump() << "\n tera: " << nlohmann::json(got).dump()
                      << "\n  ref: " << nlohmann::json(want).dump();
      }
      const size_t skip = tok->bos() >= 0 ? 1 : 0;
      std::string back;
      tok->decode(got.data() + skip, got.size() - skip, back, true);
      EXPECT_EQ(back, texts[i]);
    }
    EXPECT_EQ(mismatches, 0u) << "of " << texts.size() << " texts";
    EXPECT_GT(tokens, 5000u);
    fprintf(stderr, "%s: %zu texts, %zu tokens, %zu mismatches\n", name.c_str(), texts.size(), tokens, mismatches);
  }
}

}  // namespace
}  // namespace tera

int main(int argc, char** argv) {
  ::testing::InitGoogleTest(&argc, argv);
  if (argc != 2) {
    std::fprintf(stderr, "usage: %s WORK_DIR\n", argv[0]);
    return 2;
  }
  tera::g_work = argv[1];
  return RUN_ALL_TESTS();
}
