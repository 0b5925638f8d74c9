// Tokenizer files: tokenizer.json, tera's earlier JSON and GPT-2 vocab.json +
// merges.txt load into the same tokenizer, checkpoints' references resolve,
// and every malformed file is refused with its name and the problem.
#include <gtest/gtest.h>

#include <filesystem>
#include <nlohmann/json.hpp>

#include "bpe_test_util.h"
#include "data/byte_unicode.h"
#include "data/tokenizer_file.h"

namespace tera {
namespace {

using namespace testing_util;
using json = nlohmann::json;

TEST(ByteUnicode, IsGpt2sBijection) {
  EXPECT_EQ(byte_to_char(' '), 0x120u);   // 'Ġ'
  EXPECT_EQ(byte_to_char('\n'), 0x10Au);  // 'Ċ'
  EXPECT_EQ(byte_to_char('A'), static_cast<uint32_t>('A'));
  for (int b = 0; b < 256; ++b) EXPECT_EQ(char_to_byte(byte_to_char(static_cast<uint8_t>(b))), b);
  std::string back;
  const std::string all = random_bytes(5, 1000);
  ASSERT_TRUE(printable_to_bytes(bytes_to_printable(all), back));
  EXPECT_EQ(back, all);
  EXPECT_FALSE(printable_to_bytes("\xe2\x82\xac", back));  // '€' is not in the mapping
}

TEST(TokenizerFile, JsonRoundTrip) {
  const BpeTokenizer tok = small_tokenizer();
  const std::string path = ::testing::TempDir() + "tok_roundtrip.json";
  ASSERT_TRUE(save_tokenizer(tok, path).is_ok());
  auto back = open_tokenizer(path);
  ASSERT_TRUE(back.ok()) << back.error();
  EXPECT_EQ(back->fingerprint(), tok.fingerprint());
  EXPECT_EQ(back->eot(), tok.eot());
  const std::string text = english_like(4, 500) + random_bytes(4, 50);
  EXPECT_EQ(back->encode(text), tok.encode(text));
  auto ref = tokenizer_from_reference(tokenizer_reference(tok), "/nowhere", "ckpt/meta.json");
  ASSERT_TRUE(ref.ok()) << ref.error();
  EXPECT_EQ(ref->fingerprint(), tok.fingerprint());
  EXPECT_EQ(tokenizer_reference(BpeTokenizer::bytes()), "bytes");
  EXPECT_TRUE(tokenizer_from_reference("bytes", "", "x")->is_bytes());
  auto by_path = tokenizer_from_reference("tok_roundtrip.json", ::testing::TempDir(), "ckpt");
  ASSERT_TRUE(by_path.ok()) << by_path.error();
  EXPECT_EQ(by_path->fingerprint(), tok.fingerprint());
}

TEST(TokenizerFile, Gpt2FilesLoadLikeTheSameVocabulary) {
  const BpeTokenizer tok = small_tokenizer();
  json vocab = json::object();
  for (int32_t id = 0; id < tok.vocab_size(); ++id) {
    vocab[tok.is_special(id) ? tok.token(id) : bytes_to_printable(tok.token(id))] = id;
  }
  std::string merges = "#version: 0.2\n";
  for (const auto& m : tok.merges())
    merges += bytes_to_printable(tok.token(m.left)) + " " + bytes_to_printable(tok.token(m.right)) + "\n";
  const std::string dir = ::testing::TempDir() + "gpt2_files";
  std::filesystem::create_directories(dir);
  write_file("gpt2_files/vocab.json", vocab.dump());
  write_file("gpt2_files/merges.txt", merges);
  auto g = open_tokenizer(dir);
  ASSERT_TRUE(g.ok()) << g.error();
  EXPECT_EQ(g->eot(), tok.eot());
  const std::string text = english_like(8, 400);
  EXPECT_EQ(g->encode(text), tok.encode(text));

  auto bad = parse_gpt2_tokenizer(vocab.dump(), "#version: 0.2\nĠt he\nnot-a-token x\n", "v.json", "m.txt");
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.error().find("m.txt:"), std::string::npos) << bad.error();
  auto bad2 = parse_gpt2_tokenizer("{\"a\": 0}", "", "v.json", "m.txt");
  ASSERT_FALSE(bad2.ok());
  EXPECT_NE(bad2.error().find("v.json: must be a JSON object"), std::string::npos) << bad2.error();
}

TEST(TokenizerFile, Gpt2WriterRoundTripsTheSameTokenizer) {
  const BpeTokenizer tok = small_tokenizer();
  const std::string dir = ::testing::TempDir() + "gpt2_written";
  std::filesystem::create_directories(dir);
  ASSERT_TRUE(save_gpt2_tokenizer(tok, dir + "/vocab.json", dir + "/merges.txt").is_ok());
  auto back = open_tokenizer(dir);
  ASSERT_TRUE(back.ok()) << back.error();
  EXPECT_EQ(back->fingerprint(), tok.fingerprint());  // same ids, merges and special token
  EXPECT_EQ(back->eot(), tok.eot());
  const std::string text = english_like(6, 400) + random_bytes(6, 40);
  EXPECT_EQ(back->encode(text), tok.encode(text));
}

TEST(TokenizerFile, OnlyRegularFilesAreRead) {
  // A device would be read without end; a directory without GPT-2's files is not a tokenizer.
  for (const std::string bad : {"/dev/zero", "/dev/null"}) {
    auto t = open_tokenizer(bad);
    ASSERT_FALSE(t.ok()) << bad;
    EXPECT_NE(t.error().find(bad + ": is a character device, not a regular file"), std::string::npos) << t.error();
    // A checkpoint names only what travels with it: an absolute path is refused before it is opened.
    auto r = tokenizer_from_reference(bad, "/ckpt", "/ckpt/meta.json");
    ASSERT_FALSE(r.ok());
    EXPECT_NE(r.error().find("/ckpt/meta.json: names the tokenizer by an absolute path (" + bad + ")"),
              std::string::npos)
        << r.error();
  }
  // A relative path in a meta.json resolves beside it.
  const std::string dir = ::testing::TempDir() + "ref_beside";
  std::filesystem::create_directories(dir + "/sub");
  ASSERT_TRUE(save_tokenizer(small_tokenizer(), dir + "/sub/tok.json").is_ok());
  auto r = tokenizer_from_reference("sub/tok.json", dir, dir + "/meta.json");
  ASSERT_TRUE(r.ok()) << r.error();
  EXPECT_EQ(r->fingerprint(), small_tokenizer().fingerprint());
  // vocab.json without merges.txt is named, not skipped.
  const std::string half = ::testing::TempDir() + "gpt2_half";
  std::filesystem::create_directories(half);
  ASSERT_TRUE(save_gpt2_tokenizer(small_tokenizer(), half + "/vocab.json", half + "/m.txt").is_ok());
  auto h = open_tokenizer(half);
  ASSERT_FALSE(h.ok());
  EXPECT_NE(h.error().find("merges.txt: not found"), std::string::npos) << h.error();
}

// tera's earlier format ("tera-bpe", version 1), which files and checkpoints
// written before tokenizer.json still hold.
std::string tera_bpe_json(const BpeTokenizer& tok) {
  json j = {{"format", "tera-bpe"}, {"version", 1}, {"pretokenizer", "gpt2"}, {"vocab_size", tok.vocab_size()},
            {"special_tokens", tok.specials()}};
  json tokens = json::array(), merges = json::array();
  for (int32_t id = 0; id < tok.vocab_size(); ++id) tokens.push_back(bytes_to_printable(tok.token(id)));
  for (const auto& m : tok.merges()) merges.push_back({m.left, m.right});
  j["tokens"] = tokens;
  j["merges"] = merges;
  return j.dump();
}

TEST(TokenizerFile, EarlierTeraFormatStillLoads) {
  const BpeTokenizer tok = small_tokenizer();
  auto back = parse_tokenizer_json(tera_bpe_json(tok), "old.json");
  ASSERT_TRUE(back.ok()) << back.error();
  EXPECT_EQ(back->fingerprint(), tok.fingerprint());
  const std::string text = english_like(3, 300) + " <|endoftext|> ";
  EXPECT_EQ(back->encode(text), tok.encode(text));
}

void expect_refused(const std::string& text, const std::string& needle) {
  auto t = parse_tokenizer_json(text, "bad.json");
  ASSERT_FALSE(t.ok()) << "accepted: " << text.substr(0, 80);
  EXPECT_EQ(t.error().rfind("bad.json: ", 0), 0u) << t.error();
  EXPECT_NE(t.error().find(needle), std::string::npos) << t.error();
}

TEST(TokenizerFile, MalformedFilesAreRefusedByName) {
  const json good = json::parse(tera_bpe_json(small_tokenizer(300)));
  expect_refused("{", "not valid JSON");
  expect_refused("[]", "not a tera tokenizer");
  json j = good;
  j["version"] = 2;
  expect_refused(j.dump(), "unsupported tokenizer version 2");
  j = good;
  j["vocab_size"] = 5;
  expect_refused(j.dump(), "vocab_size");
  j = good;
  j["tokens"][3] = "\xe2\x82\xac";
  expect_refused(j.dump(), "token 3 is not a string of GPT-2 byte characters");
  j = good;
  j["tokens"][65] = j["tokens"][66];  // 'A' lost, 'B' twice
  expect_refused(j.dump(), "repeats token");
  j = good;
  j["merges"].push_back(j["merges"][0]);
  j["tokens"].push_back("zzzz");
  j["vocab_size"] = j["tokens"].size();
  expect_refused(j.dump(), "repeats merge 0");
  j = good;
  j["merges"][0] = json::array({1, 2});
  expect_refused(j.dump(), "which is not a token");
  j = good;
  j["merges"][0] = json::array({1, 100000});
  expect_refused(j.dump(), "merge 0 must be a pair of token ids");
  j = good;
  j["special_tokens"] = json::array({99999});
  expect_refused(j.dump(), "special_tokens");
  j = good;
  j["tokens"] = json::array({"a", "b"});
  j["vocab_size"] = 2;
  j["merges"] = json::array();
  j["special_tokens"] = json::array();
  expect_refused(j.dump(), "needs between 256");
  auto missing = open_tokenizer("/nonexistent/tok.json");
  ASSERT_FALSE(missing.ok());
  EXPECT_NE(missing.error().find("/nonexistent/tok.json"), std::string::npos);
  auto no_files = open_tokenizer(::testing::TempDir());
  ASSERT_FALSE(no_files.ok());
  EXPECT_NE(no_files.error().find("tokenizer.json, or vocab.json + merges.txt"), std::string::npos) << no_files.error();
}

}  // namespace
}  // namespace tera
