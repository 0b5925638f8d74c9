// JSONL corpora: the bounded line reader (CRLF, no final newline, empty
// input, a line over the bound named and found without reading on), gzip
// (multi-member, truncated, corrupt), the documents of a line (several keys,
// unicode escapes, malformed lines), and encoding: the same tokens as text
// files holding the same documents, for any thread count and chunk size, gzip
// equal to plain, malformed lines refused or skipped, one Megatron document
// per line (a dataset per key).
#include <gtest/gtest.h>
#include <zlib.h>

#include <cstring>
#include <filesystem>
#include <map>
#include <nlohmann/json.hpp>

#include "bpe_test_util.h"
#include "core/file_util.h"
#include "data/byte_source.h"
#include "data/corpus_encode.h"
#include "data/hf_tokenizer.h"
#include "data/jsonl.h"
#include "data/megatron_dataset.h"
#include "data/megatron_index.h"
#include "data/shard_dataset.h"
#include "data/tokenizer_file.h"

namespace tera {
namespace {

using namespace testing_util;

std::string gzip(std::string_view data) {
  z_stream z{};
  EXPECT_EQ(deflateInit2(&z, 6, Z_DEFLATED, 16 + MAX_WBITS, 8, Z_DEFAULT_STRATEGY), Z_OK);
  std::string out(deflateBound(&z, data.size()) + 64, '\0');
  z.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(data.data()));
  z.avail_in = static_cast<uInt>(data.size());
  z.next_out = reinterpret_cast<Bytef*>(out.data());
  z.avail_out = static_cast<uInt>(out.size());
  EXPECT_EQ(deflate(&z, Z_FINISH), Z_STREAM_END);
  out.resize(z.total_out);
  deflateEnd(&z);
  return out;
}

// All lines of a source, or its error.
Expected<std::vector<std::string>> read_lines(std::string_view data, size_t max_line = size_t{1} << 20,
                                              size_t block = size_t{1} << 20) {
  auto src = open_memory_source(data, "mem.jsonl");
  if (!src) return src.status();
  LineReader r(std::move(*src), "mem.jsonl", max_line, block);
  std::vector<std::string> out;
  for (;;) {
    auto more = r.next();
    if (!more) return more.status();
    if (!*more) return out;
    EXPECT_EQ(r.line_number(), static_cast<int64_t>(out.size()) + 1);
    out.emplace_back(r.line());
  }
}

using Lines = std::vector<std::string>;

TEST(LineReader, SplitsLinesWithLfOrCrlfAndKeepsALastLineWithoutNewline) {
  EXPECT_EQ(*read_lines(""), Lines{});
  EXPECT_EQ(*read_lines("a\r\nb\n\nc"), (Lines{"a", "b", "", "c"}));
  EXPECT_EQ(*read_lines("a\n"), Lines{"a"});
  EXPECT_EQ(*read_lines("x\ry\r\n"), Lines{"x\ry"});  // a lone \r is no line end
  EXPECT_EQ(*read_lines("a\r\nb\r"), (Lines{"a", "b\r"}));
  for (size_t block : {1, 2, 3, 7}) {  // \r\n split across reads
    EXPECT_EQ(*read_lines("ab\r\ncd\r\n\r\ne", 100, block), (Lines{"ab", "cd", "", "e"})) << block;
  }
  // Lines across read blocks (1 MiB) come back whole.
  const std::string big(3'000'000, 'q');
  EXPECT_EQ(*read_lines("s\n" + big + "\r\nt", 4'000'000), (Lines{"s", big, "t"}));
}

// A stream of 'x' without end: the reader must fail after reading about the
// bound, never holding more than the bound plus a block.
class Endless : public ByteSource {
 public:
  Expected<size_t> read(char* buf, size_t n) override {
    std::memset(buf, 'x', n);
    read_ += static_cast<int64_t>(n);
    return n;
  }
  int64_t raw_bytes() const override { return read_; }
  int64_t read_ = 0;
};

TEST(LineReader, ALineOverTheBoundIsAnErrorNamingItWithoutReadingOn) {
  auto err = read_lines("{}\n{}\n" + std::string(5000, 'y') + "\n{}\n", 4096);
  ASSERT_FALSE(err.ok());
  EXPECT_NE(err.error().find("mem.jsonl:3: a line longer than 4096 bytes"), std::string::npos) << err.error();

  auto src = std::make_unique<Endless>();
  Endless* raw = src.get();
  LineReader r(std::move(src), "endless.jsonl", size_t{8} << 20);
  auto more = r.next();
  ASSERT_FALSE(more.ok());
  EXPECT_NE(more.error().find("endless.jsonl:1: a line longer than 8388608 bytes"), std::string::npos);
  EXPECT_LE(raw->read_, (int64_t{8} << 20) + (int64_t{1} << 20));  // the bound plus one read block
}

TEST(ByteSource, GzipByMagicWithSeveralMembersAndBrokenStreamsNamed) {
  const std::string a = "{\"text\": \"one\"}\n", b = "{\"text\": \"two\"}\r\n";
  EXPECT_EQ(*read_lines(gzip(a + b)), (Lines{a.substr(0, a.size() - 1), b.substr(0, b.size() - 2)}));
  EXPECT_EQ(*read_lines(gzip(a) + gzip(b)), *read_lines(a + b));  // `cat a.gz b.gz`
  EXPECT_EQ(*read_lines(gzip("")), Lines{});
  const std::string z = gzip(english_like(3, 20000));
  auto cut = read_lines(z.substr(0, z.size() / 2));
  ASSERT_FALSE(cut.ok());
  EXPECT_NE(cut.error().find("mem.jsonl: truncated gzip data"), std::string::npos) << cut.error();
  std::string bad = z;
  bad[z.size() / 2] = static_cast<char>(bad[z.size() / 2] ^ 0x55);
  bad[z.size() / 2 + 1] = static_cast<char>(bad[z.size() / 2 + 1] ^ 0x55);
  auto corrupt = read_lines(bad);
  ASSERT_FALSE(corrupt.ok());
  EXPECT_NE(corrupt.error().find("mem.jsonl: "), std::string::npos);
  auto trailing = read_lines(gzip(a) + "garbage");
  ASSERT_FALSE(trailing.ok());
  EXPECT_NE(trailing.error().find("corrupt gzip data"), std::string::npos) << trailing.error();
}

TEST(ParseJsonlLine, DocumentsOfTheKeysInKeyOrder) {
  std::vector<JsonlDocument> d;
  EXPECT_EQ(parse_jsonl_line(R"({"title": "T", "text": "caf\u00e9 \ud83d\ude00\n", "n": 1})", {"text", "title"}, d),
            "");
  ASSERT_EQ(d.size(), 2u);
  EXPECT_EQ(d[0].key, 0);
  EXPECT_EQ(d[0].text, "caf\xC3\xA9 \xF0\x9F\x98\x80\n");  // escapes decoded to UTF-8
  EXPECT_EQ(d[1].key, 1);
  EXPECT_EQ(d[1].text, "T");
  EXPECT_EQ(parse_jsonl_line(" \t\r", {"text"}, d), "");  // blank: no document, no error
  EXPECT_TRUE(d.empty());
  EXPECT_EQ(parse_jsonl_line(R"({"text": ""})", {"text"}, d), "");  // "" is no document
  EXPECT_TRUE(d.empty());
  EXPECT_EQ(parse_jsonl_line("\xEF\xBB\xBF{\"text\": \"bom\"}", {"text"}, d), "");
  ASSERT_EQ(d.size(), 1u);
}

TEST(ParseJsonlLine, MalformedLinesSayWhatIsWrong) {
  std::vector<JsonlDocument> d;
  auto why = [&](std::string_view line) { return parse_jsonl_line(line, {"text"}, d); };
  EXPECT_EQ(why(R"({"text": "a")").rfind("not valid JSON (parse error at column", 0), 0u) << why(R"({"text": "a")");
  EXPECT_EQ(why(R"(["text"])"), "not a JSON object but array");
  EXPECT_EQ(why(R"({"content": "a", "id": 3})"),
            "no key \"text\" (its keys: \"content\", \"id\"); pass --json-key with the key that holds the text");
  EXPECT_EQ(why(R"({"text": ["a"]})"), "the value of \"text\" is an array, not a string");
  EXPECT_EQ(why(R"({"text": null})"), "the value of \"text\" is a null, not a string");
  EXPECT_EQ(why("{\"text\": \"\xff\"}").rfind("not valid JSON", 0), 0u);  // invalid UTF-8
  EXPECT_EQ(why(R"({"text": "\ud800"})").rfind("not valid JSON", 0), 0u);  // a lone surrogate
  EXPECT_EQ(why(R"({"text": "a"} x)").rfind("not valid JSON", 0), 0u);
}

std::string jsonl_line(const std::string& text, const std::string& title) {
  return nlohmann::json{{"title", title}, {"text", text}}.dump() + "\n";
}

// The documents of test_corpus_encode's corpus, as text files and as one JSONL file.
struct Docs {
  std::vector<std::string> texts, files;
  std::string jsonl;  // one line per text (CRLF on some), blank lines between some
};

Docs make_docs(const std::string& tag) {
  Docs d;
  d.texts = {english_like(21, 4000), "no trailing newline", english_like(22, 50) + "\xC3\xA9\xE6\x97\xA5",
             std::string(5000, ' ') + "x", std::string(20000, 'x'), "\n\n  two blank lines\r\n"};
  for (size_t i = 0; i < d.texts.size(); ++i) {
    d.files.push_back(write_file(tag + std::to_string(i) + ".txt", d.texts[i]));
    std::string line = jsonl_line(d.texts[i], "title " + std::to_string(i));
    if (i % 2 == 1) line.insert(line.size() - 1, "\r");
    d.jsonl += line + (i % 3 == 0 ? "\n" : "");
  }
  return d;
}

std::vector<int32_t> all_tokens(const TokenDataset& ds) {
  std::vector<int32_t> t(static_cast<size_t>(ds.num_tokens()));
  ds.read(0, ds.num_tokens(), t.data());
  return t;
}

std::vector<int32_t> encode_tokens(const std::vector<std::string>& files, const EncodeOptions& o,
                                   EncodeStats* stats = nullptr) {
  std::vector<int32_t> out;
  auto st = encode_corpus(files, small_tokenizer(), o, [&](int, const int32_t* t, size_t n) {
    out.insert(out.end(), t, t + n);
    return ok_status();
  });
  EXPECT_TRUE(st.ok()) << st.error();
  if (stats != nullptr && st.ok()) *stats = *st;
  return out;
}

// The documents of a token stream: split at each end-of-text (which closes every document) and decoded.
std::vector<std::string> documents_of(const std::vector<int32_t>& tokens) {
  const BpeTokenizer tok = small_tokenizer();
  std::vector<std::string> docs;
  std::vector<int32_t> cur;
  for (int32_t t : tokens) {
    if (t != tok.eot()) {
      cur.push_back(t);
      continue;
    }
    docs.push_back(tok.decode(cur));
    cur.clear();
  }
  EXPECT_TRUE(cur.empty()) << "a document not closed by the end-of-text token";
  return docs;
}

EncodeOptions jsonl_opts(int threads, size_t chunk_bytes) {
  EncodeOptions o;
  o.threads = threads;
  o.chunk_bytes = chunk_bytes;
  o.jsonl.format = InputFormat::kAuto;
  return o;
}

TEST(EncodeJsonl, SameTokensAsTextFilesForAnyThreadsChunksAndGzip) {
  const Docs d = make_docs("same");
  const std::string plain = write_file("same.jsonl", d.jsonl);
  const std::string gz = write_file("same.jsonl.gz", gzip(d.jsonl));
  const std::string gz_unnamed = write_file("same_gz_as_jsonl", gzip(d.jsonl));  // found by its magic bytes
  const std::vector<int32_t> want = encode_tokens(d.files, jsonl_opts(1, size_t{1} << 20));
  EncodeStats st;
  EXPECT_EQ(encode_tokens({plain}, jsonl_opts(1, size_t{1} << 20), &st), want);
  EXPECT_EQ(st.documents[0], 6);
  EXPECT_EQ(st.input.jsonl_lines, 8);  // 6 documents and 2 blank lines
  EXPECT_EQ(encode_tokens({plain}, jsonl_opts(3, 64)), want);
  EXPECT_EQ(encode_tokens({plain, plain}, jsonl_opts(2, 100)).size(), 2 * want.size());
  EXPECT_EQ(encode_tokens({gz}, jsonl_opts(3, 64)), want);
  EncodeOptions forced = jsonl_opts(2, 1000);
  forced.jsonl.format = InputFormat::kJsonl;
  EXPECT_EQ(encode_tokens({gz_unnamed}, forced), want);

  // Shard files too: byte-identical for 1 and 3 threads, plain and gzip.
  std::vector<uint32_t> crcs[3];
  const std::string inputs[3] = {plain, plain, gz};
  for (int v = 0; v < 3; ++v) {
    EncodeOptions o = jsonl_opts(v == 0 ? 1 : 3, v == 0 ? size_t{1} << 20 : 64);
    o.shard_tokens = 777;
    auto m = encode_to_shards({inputs[v]}, small_tokenizer(), ::testing::TempDir() + "jenc" + std::to_string(v), o);
    ASSERT_TRUE(m.ok()) << m.error();
    EXPECT_EQ(m->splits.at("train").documents, 6);
    for (const auto& e : m->splits.at("train").shards) crcs[v].push_back(e.crc32);
  }
  EXPECT_GT(crcs[0].size(), 3u);
  EXPECT_EQ(crcs[0], crcs[1]);
  EXPECT_EQ(crcs[0], crcs[2]);
}

TEST(EncodeJsonl, SeveralKeysGiveDocumentsInKeyOrderAndCountsDoNotDependOnThreads) {
  const std::string f = write_file("keys.jsonl", jsonl_line("body one", "T1") + jsonl_line("body two", "T2"));
  EncodeOptions o = jsonl_opts(1, 64);
  o.jsonl.keys = {"title", "text"};
  EncodeStats st;
  EXPECT_EQ(documents_of(encode_tokens({f}, o, &st)), (Lines{"T1", "body one", "T2", "body two"}));
  EXPECT_EQ(st.key_documents, (std::vector<int64_t>{2, 2}));

  const Docs d = make_docs("count");
  const std::string big = write_file("count.jsonl", d.jsonl + d.jsonl);
  auto one = count_words({big}, 1, {}, o.jsonl), three = count_words({big}, 3, {}, o.jsonl);
  ASSERT_TRUE(one.ok() && three.ok());
  std::map<std::string, int64_t> a, b;
  one->for_each([&](std::string_view p, int64_t n) { a[std::string(p)] = n; });
  three->for_each([&](std::string_view p, int64_t n) { b[std::string(p)] = n; });
  EXPECT_EQ(a, b);
  EXPECT_EQ(a.at("title"), 12);
}

TEST(EncodeJsonl, MalformedLinesAreNamedByLineAndSkippedOnlyWhenAsked) {
  const std::string f = write_file("bad.jsonl", jsonl_line("a", "") + "\n" + "{\"text\": 7}\n" + jsonl_line("b", "") +
                                                    "not json\r\n" + jsonl_line("c", ""));
  EncodeOptions o = jsonl_opts(3, 64);
  auto err = encode_corpus({f}, small_tokenizer(), o, [](int, const int32_t*, size_t) { return ok_status(); });
  ASSERT_FALSE(err.ok());
  EXPECT_NE(err.error().find(f + ":3: the value of \"text\" is a number, not a string; fix the line, or pass "
                                 "--skip-bad-lines"),
            std::string::npos)
      << err.error();
  o.jsonl.skip_bad_lines = true;
  EncodeStats st;
  EXPECT_EQ(documents_of(encode_tokens({f}, o, &st)), (Lines{"a", "b", "c"}));
  EXPECT_EQ(st.input.bad_lines, 2);
  EXPECT_EQ(st.input.jsonl_lines, 6);
  EXPECT_EQ(st.input.first_bad, f + ":3: the value of \"text\" is a number, not a string");
}

TEST(EncodeJsonl, EmptyFilesAndGzipTextAndOverlongLines) {
  EncodeStats st;
  EXPECT_TRUE(encode_tokens({write_file("empty.jsonl", "")}, jsonl_opts(2, 64), &st).empty());
  EXPECT_EQ(st.documents[0], 0);
  EXPECT_TRUE(encode_tokens({write_file("blank.jsonl", "\n\r\n  \n")}, jsonl_opts(2, 64), &st).empty());
  EXPECT_EQ(st.input.jsonl_lines, 3);

  const std::string gz_text = write_file("text.txt.gz", gzip("plain text"));
  auto e = encode_corpus({gz_text}, small_tokenizer(), jsonl_opts(1, 64),
                         [](int, const int32_t*, size_t) { return ok_status(); });
  ASSERT_FALSE(e.ok());
  EXPECT_NE(e.error().find(gz_text + ": is gzip-compressed; tera reads gzip only as JSONL"), std::string::npos);

  EncodeOptions o = jsonl_opts(2, 64);
  o.jsonl.max_line_bytes = 100;
  const std::string f = write_file("long.jsonl", jsonl_line("short", "") + jsonl_line(std::string(200, 'w'), ""));
  auto l = encode_corpus({f}, small_tokenizer(), o, [](int, const int32_t*, size_t) { return ok_status(); });
  ASSERT_FALSE(l.ok());
  EXPECT_NE(l.error().find(f + ":2: a line longer than 100 bytes"), std::string::npos) << l.error();
}

TEST(EncodeJsonl, ValFractionHoldsOutEveryNthLine) {
  std::string text;
  for (int i = 1; i <= 10; ++i) text += jsonl_line("doc" + std::to_string(i), "");
  const std::string f = write_file("val.jsonl", text);
  EncodeOptions o = jsonl_opts(2, 64);
  o.val_fraction = 0.25;  // lines 4 and 8
  const std::string dir = ::testing::TempDir() + "jval";
  auto m = encode_to_shards({f}, small_tokenizer(), dir, o);
  ASSERT_TRUE(m.ok()) << m.error();
  auto va = ShardDataset::open(dir, "val");
  ASSERT_TRUE(va.ok()) << va.error();
  EXPECT_EQ(documents_of(all_tokens(**va)), (Lines{"doc4", "doc8"}));
  EXPECT_EQ(m->splits.at("train").documents, 8);
}

TEST(EncodeJsonl, MegatronGetsOneDocumentPerLineAndADatasetPerKey) {
  std::string text;
  int lines = 0;
  for (int i = 0; i < 37; ++i, ++lines) text += jsonl_line(english_like(100 + i, 30), "title " + std::to_string(i));
  const std::string f = write_file("mega.jsonl.gz", gzip(text));
  const BpeTokenizer tok = small_tokenizer();
  const std::string prefix = ::testing::TempDir() + "mega_text_document";
  auto st = encode_to_megatron({f}, tok, prefix, jsonl_opts(3, 64));
  ASSERT_TRUE(st.ok()) << st.error();
  auto ds = MegatronDataset::open(prefix, tok.vocab_size(), "vocab");
  ASSERT_TRUE(ds.ok()) << ds.error();
  EXPECT_EQ((*ds)->index().documents(), static_cast<uint64_t>(lines));
  EXPECT_EQ((*ds)->index().sequences, static_cast<uint64_t>(lines));

  EncodeOptions two = jsonl_opts(2, 64);
  two.jsonl.keys = {"text", "title"};
  const std::string base = ::testing::TempDir() + "mega";
  auto st2 = encode_to_megatron({f}, tok, base, two);
  ASSERT_TRUE(st2.ok()) << st2.error();
  for (const char* key : {"text", "title"}) {
    auto d = MegatronDataset::open(base + "_" + key, tok.vocab_size(), "vocab");
    ASSERT_TRUE(d.ok()) << d.error();
    EXPECT_EQ((*d)->index().documents(), static_cast<uint64_t>(lines));
  }
  auto text_only = MegatronDataset::open(base + "_text", tok.vocab_size(), "vocab");
  EXPECT_EQ(all_tokens(**text_only), all_tokens(**ds));  // the text key's dataset equals the one-key encode
  two.jsonl.keys = {"text", "a/b"};
  auto bad = encode_to_megatron({f}, tok, base, two);
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.error().find("--json-key a/b: with several keys"), std::string::npos) << bad.error();
}

// A tokenizer.json template's beginning-of-text opens every JSONL document,
// of every key, as it opens a text file.
TEST(EncodeJsonl, BeginningOfTextOpensEachDocument) {
  const BpeTokenizer base = small_tokenizer();
  nlohmann::json j = nlohmann::json::parse(tokenizer_to_json(base));
  j.erase("tera_special_tokens_are_not_text");
  const auto bos = static_cast<int32_t>(base.vocab_size());
  j["added_tokens"].push_back({{"id", bos}, {"content", "<|begin_of_text|>"}, {"special", true}});
  j["post_processor"] = {{"type", "TemplateProcessing"},
                         {"single", {{{"SpecialToken", {{"id", "<|begin_of_text|>"}}}}, {{"Sequence", {{"id", "A"}}}}}}};
  auto tok = parse_hf_tokenizer(j.dump(), "bos.json");
  ASSERT_TRUE(tok.ok()) << tok.error();
  ASSERT_EQ(tok->bos(), bos);
  const std::string f = write_file("bos.jsonl", jsonl_line("one", "T1") + jsonl_line("two", "T2"));
  EncodeOptions o = jsonl_opts(2, 64);
  o.jsonl.keys = {"text", "title"};
  const std::string prefix = ::testing::TempDir() + "bos";
  auto st = encode_to_megatron({f}, *tok, prefix, o);
  ASSERT_TRUE(st.ok()) << st.error();
  EXPECT_EQ(st->key_tokens[0] + st->key_tokens[1], st->tokens[0]);  // BOS counted with its document's key
  for (const char* key : {"text", "title"}) {
    auto d = MegatronDataset::open(prefix + "_" + key, tok->vocab_size(), "vocab");
    ASSERT_TRUE(d.ok()) << d.error();
    const std::vector<int32_t> t = all_tokens(**d);
    EXPECT_EQ((*d)->index().documents(), 2u);
    EXPECT_EQ(std::count(t.begin(), t.end(), bos), 2);
    EXPECT_EQ(t.front(), bos);
    EXPECT_EQ(t.back(), tok->eot());
    const int64_t first = (*d)->index().length(0);
    EXPECT_EQ(t[static_cast<size_t>(first)], bos);  // the second document opens with it too
    EXPECT_EQ(t[static_cast<size_t>(first) - 1], tok->eot());
  }
}

}  // namespace
}  // namespace tera
