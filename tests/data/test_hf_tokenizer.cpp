// Hugging Face tokenizer.json and tiktoken rank files: each reads back what
// tera writes (same fingerprint, same ids), the rules they add (patterns,
// ignore_merges, added tokens, BOS) encode as specified, tiktoken files
// encode as tiktoken's own merge loop (written out below as the oracle), and
// malformed or unsupported files are refused by name. Parity with the
// reference JavaScript implementations is tokenizer_parity.py's.
#include <gtest/gtest.h>

#include <map>
#include <nlohmann/json.hpp>

#include "bpe_test_util.h"
#include "data/byte_unicode.h"
#include "data/hf_tokenizer.h"
#include "data/tiktoken_file.h"
#include "data/tokenizer_file.h"

namespace tera {
namespace {

using namespace testing_util;
using json = nlohmann::json;

// tiktoken's merge loop as tiktoken writes it: the whole piece if it is a
// token, else merge the adjacent pair whose concatenation has the lowest rank
// (leftmost first) until none is a token.
std::vector<int32_t> tiktoken_oracle(const std::map<std::string, int32_t>& ranks, std::string_view piece) {
  if (auto it = ranks.find(std::string(piece)); it != ranks.end()) return {it->second};
  std::vector<std::string> parts;
  for (char c : piece) parts.emplace_back(1, c);
  while (parts.size() > 1) {
    int32_t best = -1;
    size_t at = 0;
    for (size_t i = 0; i + 1 < parts.size(); ++i) {
      auto it = ranks.find(parts[i] + parts[i + 1]);
      if (it != ranks.end() && (best < 0 || it->second < best)) best = it->second, at = i;
    }
    if (best < 0) break;
    parts[at] += parts[at + 1];
    parts.erase(parts.begin() + static_cast<std::ptrdiff_t>(at) + 1);
  }
  std::vector<int32_t> ids;
  for (const auto& p : parts) ids.push_back(ranks.at(p));
  return ids;
}

std::string base64(std::string_view bytes) {
  static const char* k = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
  std::string out;
  for (size_t i = 0; i < bytes.size(); i += 3) {
    uint32_t w = static_cast<uint8_t>(bytes[i]) << 16;
    if (i + 1 < bytes.size()) w |= static_cast<uint32_t>(static_cast<uint8_t>(bytes[i + 1])) << 8;
    if (i + 2 < bytes.size()) w |= static_cast<uint8_t>(bytes[i + 2]);
    out += k[w >> 18];
    out += k[(w >> 12) & 63];
    out += i + 1 < bytes.size() ? k[(w >> 6) & 63] : '=';
    out += i + 2 < bytes.size() ? k[w & 63] : '=';
  }
  return out;
}

// A rank file from a trained vocabulary: its tokens in id order are ranks
// (a BPE's merge results come in rank order), its special token left out.
std::string rank_file(const BpeTokenizer& tok, std::map<std::string, int32_t>& ranks) {
  std::string file;
  for (int32_t id = 0; id < tok.vocab_size(); ++id) {
    if (tok.is_special(id)) continue;
    file += base64(tok.token(id)) + " " + std::to_string(id) + "\n";
    ranks[tok.token(id)] = id;
  }
  return file;
}

TEST(Tiktoken, EncodesAsTiktokensMergeLoop) {
  const BpeTokenizer trained = small_tokenizer();
  std::map<std::string, int32_t> ranks;
  const std::string file = rank_file(trained, ranks);
  const int32_t eot = static_cast<int32_t>(trained.vocab_size()) + 3;  // leaves unused ids between
  auto tok = parse_tiktoken(file, Pretokenizer::cl100k, {{"<|endoftext|>", eot}}, "ranks.tiktoken");
  ASSERT_TRUE(tok.ok()) << tok.error();
  EXPECT_EQ(tok->vocab_size(), eot + 1);
  EXPECT_EQ(tok->eot(), eot);
  size_t pieces = 0;
  for (uint64_t seed = 0; seed < 20; ++seed) {
    const std::string text = english_like(seed, 200) + random_bytes(seed, 30);
    std::vector<int32_t> want;
    for_each_pretoken(Pretokenizer::cl100k, text, [&](std::string_view p) {
      const auto ids = tiktoken_oracle(ranks, p);
      want.insert(want.end(), ids.begin(), ids.end());
      ++pieces;
    });
    ASSERT_EQ(tok->encode(text), want) << "seed " << seed;
    EXPECT_EQ(tok->decode(want), text);
  }
  EXPECT_GT(pieces, 2000u);
  // Special tokens are found in the text, as tiktoken does when they are allowed.
  const auto ids = tok->encode("a<|endoftext|>b");
  EXPECT_EQ(ids, (std::vector<int32_t>{ranks.at("a"), eot, ranks.at("b")}));
}

// A token no merge reaches ("abc" without "ab" or "bc") is still the piece's
// encoding: tiktoken, and tokenizer.json's ignore_merges, look the piece up first.
TEST(Tiktoken, APieceThatIsATokenIsTakenWhole) {
  std::string file;
  for (int b = 0; b < 256; ++b) file += base64(std::string(1, static_cast<char>(b))) + " " + std::to_string(b) + "\n";
  file += base64("abc") + " 256\n";
  auto tok = parse_tiktoken(file, Pretokenizer::gpt2, {}, "r");
  ASSERT_TRUE(tok.ok()) << tok.error();
  EXPECT_TRUE(tok->merges().empty());
  EXPECT_EQ(tok->encode("abc abcd"), (std::vector<int32_t>{256, ' ', 'a', 'b', 'c', 'd'}));
  // The same vocabulary as a tokenizer.json without ignore_merges: the merges alone decide.
  json j = json::parse(tokenizer_to_json(*tok));
  j["model"]["ignore_merges"] = false;
  auto merged_only = parse_hf_tokenizer(j.dump(), "t.json");
  ASSERT_TRUE(merged_only.ok()) << merged_only.error();
  EXPECT_EQ(merged_only->encode("abc"), (std::vector<int32_t>{'a', 'b', 'c'}));
}

TEST(Tiktoken, MalformedFilesAreRefusedByLine) {
  const auto refused = [](std::string_view text, const std::vector<TiktokenSpecial>& sp, const std::string& needle) {
    auto t = parse_tiktoken(text, Pretokenizer::gpt2, sp, "r.tiktoken");
    ASSERT_FALSE(t.ok()) << text.substr(0, 40);
    EXPECT_NE(t.error().find(needle), std::string::npos) << t.error();
  };
  std::string all;
  for (int b = 0; b < 256; ++b) all += base64(std::string(1, static_cast<char>(b))) + " " + std::to_string(b) + "\n";
  refused(all + "not base64! 256\n", {}, "r.tiktoken:257: expected \"BASE64 RANK\"");
  refused(all + "YWI= 3\n", {}, "r.tiktoken:257: rank 3 is given twice");
  refused(all + "YWI= -1\n", {}, "rank -1 is outside");
  refused(all, {{"<s>", 5}}, "special token <s> has id 5, which is a rank of the file");
  refused("QQ== 0\n", {}, "needs between 256");
  ASSERT_TRUE(parse_tiktoken(all, Pretokenizer::gpt2, {}, "r").ok());
  auto list = parse_special_list("<|endoftext|>=100257,<|a=b|>=7", "--special");
  ASSERT_TRUE(list.ok()) << list.error();
  EXPECT_EQ((*list)[1].text, "<|a=b|>");
  EXPECT_EQ((*list)[1].id, 7);
  auto bad = parse_special_list("<s>", "--special");
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.error().find("--special: \"<s>\" must be TEXT=ID"), std::string::npos) << bad.error();
}

TEST(Tiktoken, OpenTokenizerNeedsThePatternAndTellsFormatsApart) {
  const BpeTokenizer trained = small_tokenizer();
  std::map<std::string, int32_t> ranks;
  const std::string path = write_file("ranks.tiktoken", rank_file(trained, ranks));
  auto no_pattern = open_tokenizer(path);
  ASSERT_FALSE(no_pattern.ok());
  EXPECT_NE(no_pattern.error().find("is a tiktoken rank file; name its pre-tokenizer with --pattern"),
            std::string::npos)
      << no_pattern.error();
  auto bad_pattern = open_tokenizer(TokenizerSpec{path, "o200k", ""});
  ASSERT_FALSE(bad_pattern.ok());
  EXPECT_NE(bad_pattern.error().find("\"o200k\": not a pre-tokenizer"), std::string::npos) << bad_pattern.error();
  auto ok = open_tokenizer(TokenizerSpec{path, "llama3", "<|endoftext|>=600"});
  ASSERT_TRUE(ok.ok()) << ok.error();
  EXPECT_EQ(ok->rules().pretokenizer, Pretokenizer::cl100k);
  const std::string json_path = write_file("hf_for_pattern.json", tokenizer_to_json(trained));
  auto json_with_pattern = open_tokenizer(TokenizerSpec{json_path, "cl100k", ""});
  ASSERT_FALSE(json_with_pattern.ok());
  EXPECT_NE(json_with_pattern.error().find("is JSON, not a tiktoken rank file"), std::string::npos);
  auto specials_without = open_tokenizer(TokenizerSpec{json_path, "", "<s>=1"});
  ASSERT_FALSE(specials_without.ok());
  EXPECT_NE(specials_without.error().find("only with a tiktoken rank file"), std::string::npos);
  // Written as tokenizer.json and read back: the same tokenizer (all-splits merges, ignore_merges).
  auto back = parse_tokenizer_json(tokenizer_to_json(*ok), "tik.json");
  ASSERT_TRUE(back.ok()) << back.error();
  EXPECT_EQ(back->fingerprint(), ok->fingerprint());
  const std::string text = english_like(9, 300) + "<|endoftext|>" + random_bytes(9, 40);
  EXPECT_EQ(back->encode(text), ok->encode(text));
}

TEST(HfTokenizer, WrittenFilesReadBackToTheSameTokenizer) {
  // The byte tokenizer (what a shard directory encoded with "bytes" holds).
  auto bytes = parse_hf_tokenizer(tokenizer_to_json(BpeTokenizer::bytes()), "bytes.json");
  ASSERT_TRUE(bytes.ok()) << bytes.error();
  EXPECT_TRUE(bytes->is_bytes());
  EXPECT_EQ(bytes->fingerprint(), BpeTokenizer::bytes().fingerprint());
  const BpeTokenizer trained = small_tokenizer();
  const std::string text = english_like(2, 400) + " <|endoftext|> " + random_bytes(2, 40);
  // tera's trained tokenizer: special tokens are not text, marked by tera's key.
  const json j = json::parse(tokenizer_to_json(trained));
  EXPECT_EQ(j["model"]["type"], "BPE");
  EXPECT_EQ(j["pre_tokenizer"]["type"], "ByteLevel");
  EXPECT_EQ(j["added_tokens"][0]["content"], "<|endoftext|>");
  EXPECT_EQ(j["tera_special_tokens_are_not_text"], true);
  auto back = parse_hf_tokenizer(j.dump(), "t.json");
  ASSERT_TRUE(back.ok()) << back.error();
  EXPECT_EQ(back->fingerprint(), trained.fingerprint());
  EXPECT_EQ(back->encode(text), trained.encode(text));
  // Without tera's key it is a Hugging Face tokenizer: <|endoftext|> in the text is its id.
  json hf = j;
  hf.erase("tera_special_tokens_are_not_text");
  auto matched = parse_hf_tokenizer(hf.dump(), "hf.json");
  ASSERT_TRUE(matched.ok()) << matched.error();
  const auto ids = matched->encode("x <|endoftext|> y");
  EXPECT_EQ(std::count(ids.begin(), ids.end(), trained.eot()), 1);
  // A Llama 3 style file: Split with cl100k's pattern, ignore_merges, BOS, an added non-special token.
  json llama = hf;
  llama["pre_tokenizer"] = {{"type", "Sequence"},
                            {"pretokenizers",
                             {{{"type", "Split"},
                               {"pattern", {{"Regex", pretokenizer_regex(Pretokenizer::cl100k)}}},
                               {"behavior", "Isolated"},
                               {"invert", false}},
                              {{"type", "ByteLevel"}, {"add_prefix_space", false}, {"use_regex", false}}}}};
  llama["model"]["ignore_merges"] = true;
  const int32_t bos = static_cast<int32_t>(trained.vocab_size()), tag = bos + 1;
  llama["added_tokens"].push_back({{"id", bos}, {"content", "<|begin_of_text|>"}, {"special", true}});
  llama["added_tokens"].push_back({{"id", tag}, {"content", "<tag>"}, {"special", false}});
  llama["post_processor"] = {{"type", "Sequence"},
                             {"processors",
                              {{{"type", "ByteLevel"}},
                               {{"type", "TemplateProcessing"},
                                {"single", {{{"SpecialToken", {{"id", "<|begin_of_text|>"}}}}, {{"Sequence", {{"id", "A"}}}}}}}}}};
  auto l3 = parse_hf_tokenizer(llama.dump(), "llama.json");
  ASSERT_TRUE(l3.ok()) << l3.error();
  EXPECT_EQ(l3->bos(), bos);
  EXPECT_EQ(l3->rules().pretokenizer, Pretokenizer::cl100k);
  EXPECT_TRUE(l3->rules().whole_piece_first);
  const auto tagged = l3->encode("a<tag>b");
  EXPECT_EQ(tagged.size(), 3u);
  EXPECT_EQ(tagged[1], tag);
  EXPECT_EQ(l3->decode(tagged), "a<tag>b");  // a non-special added token decodes as text
  auto l3_back = parse_hf_tokenizer(tokenizer_to_json(*l3), "l3.json");
  ASSERT_TRUE(l3_back.ok()) << l3_back.error();
  EXPECT_EQ(l3_back->fingerprint(), l3->fingerprint());
  EXPECT_EQ(l3_back->bos(), bos);
  EXPECT_EQ(l3_back->encode(text), l3->encode(text));
  // Both merge spellings read alike.
  json pairs = hf;
  for (auto& m : pairs["model"]["merges"]) {
    const std::string s = m.get<std::string>();
    m = json::array({s.substr(0, s.find(' ')), s.substr(s.find(' ') + 1)});
  }
  auto p = parse_hf_tokenizer(pairs.dump(), "pairs.json");
  ASSERT_TRUE(p.ok()) << p.error();
  EXPECT_EQ(p->fingerprint(), matched->fingerprint());
}

void expect_hf_refused(const json& j, const std::string& needle) {
  auto t = parse_hf_tokenizer(j.dump(), "tok.json");
  ASSERT_FALSE(t.ok()) << "accepted; wanted: " << needle;
  EXPECT_EQ(t.error().rfind("tok.json: ", 0), 0u) << t.error();
  EXPECT_NE(t.error().find(needle), std::string::npos) << t.error();
}

TEST(HfTokenizer, UnsupportedAndMalformedFilesAreRefusedByName) {
  const json good = json::parse(tokenizer_to_json(small_tokenizer(300)));
  json j = good;
  j["model"]["type"] = "WordPiece";
  expect_hf_refused(j, "model.type: \"WordPiece\" is not implemented");
  j = good;
  j["model"]["type"] = "Unigram";
  expect_hf_refused(j, "\"Unigram\" is not implemented");
  j = good;
  j["model"]["byte_fallback"] = true;
  expect_hf_refused(j, "model.byte_fallback");
  j = good;
  j["normalizer"] = {{"type", "NFC"}};
  expect_hf_refused(j, "normalizer: \"NFC\" is not implemented");
  j = good;
  j["pre_tokenizer"] = {{"type", "Metaspace"}};
  expect_hf_refused(j, "pre_tokenizer: \"Metaspace\" is not implemented");
  j = good;
  j["pre_tokenizer"]["add_prefix_space"] = true;
  expect_hf_refused(j, "add_prefix_space");
  j = good;
  j["pre_tokenizer"] = {{"type", "Sequence"},
                        {"pretokenizers",
                         {{{"type", "Split"}, {"pattern", {{"Regex", "\\w+"}}}, {"behavior", "Isolated"}},
                          {{"type", "ByteLevel"}, {"use_regex", false}}}}};
  expect_hf_refused(j, "the Split pattern \"\\\\w+\" is not one tera implements");
  j = good;
  j["added_tokens"][0]["lstrip"] = true;
  expect_hf_refused(j, "sets lstrip");
  j = good;
  j["model"]["merges"].push_back("nosuch token");
  expect_hf_refused(j, "which is not in model.vocab");
  j = good;
  j["model"]["merges"][0] = 5;
  expect_hf_refused(j, "model.merges: merge 0 must be");
  j = good;
  j["model"]["vocab"]["\xe2\x82\xac"] = 1000;  // '€' is not a byte-level character
  expect_hf_refused(j, "not written in byte-level characters");
  j = good;
  j["model"]["vocab"]["zz"] = 3;  // id 3 is already another token
  expect_hf_refused(j, "id 3 is given to two different tokens");
  j = good;
  j["model"]["vocab"]["zz"] = int64_t{1} << 40;
  expect_hf_refused(j, "is outside [0,");
  j = good;
  j["post_processor"] = {{"type", "TemplateProcessing"},
                         {"single", {{{"Sequence", {{"id", "A"}}}}, {{"SpecialToken", {{"id", "<|endoftext|>"}}}}}}};
  expect_hf_refused(j, "adds tokens after the text");
  j = good;
  j["post_processor"] = {{"type", "RobertaProcessing"}};
  expect_hf_refused(j, "\"RobertaProcessing\" is not implemented");
  j = good;
  j["decoder"] = {{"type", "WordPiece"}};
  expect_hf_refused(j, "decoder: \"WordPiece\"");
  j = good;
  j.erase("model");
  expect_hf_refused(j, "model: is missing");
  j = good;
  j["model"].erase("vocab");
  expect_hf_refused(j, "model.vocab: must be an object");
}

}  // namespace
}  // namespace tera
