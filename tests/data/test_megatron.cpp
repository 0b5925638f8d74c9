// Megatron indexed datasets: an index laid out byte by byte here (not through
// our writer) read back for every integer dtype; writer -> reader round trip;
// encode_to_megatron giving the same token stream (and the same training
// windows) as encode_to_shards; every bad-input case with the file and the
// field named; the weighted blend's order, shares, determinism and resume.
#include <gtest/gtest.h>

#include <cstring>
#include <filesystem>
#include <fstream>

#include "bpe_test_util.h"
#include "data/blend_loader.h"
#include "data/corpus_encode.h"
#include "data/megatron_dataset.h"
#include "data/shard_dataset.h"
#include "data/tokenizer_file.h"
#include "data/training_data.h"

namespace tera {
namespace {

namespace fs = std::filesystem;
using namespace testing_util;

// Little-endian byte builders for hand-laid files.
template <typename T>
void put(std::string& s, T v) {
  char b[sizeof(T)];
  std::memcpy(b, &v, sizeof(T));
  s.append(b, sizeof(T));
}

// An MMIDIDX version-1 index, field by field as Megatron's _IndexWriter lays it out.
std::string idx_bytes(uint8_t dtype_code, const std::vector<int32_t>& lengths, const std::vector<int64_t>& pointers,
                      const std::vector<int64_t>& doc_idx, uint64_t version = 1) {
  std::string s("MMIDIDX\0\0", 9);
  put<uint64_t>(s, version);
  put<uint8_t>(s, dtype_code);
  put<uint64_t>(s, lengths.size());
  put<uint64_t>(s, doc_idx.size());
  for (int32_t l : lengths) put(s, l);
  for (int64_t p : pointers) put(s, p);
  for (int64_t d : doc_idx) put(s, d);
  return s;
}

template <typename T>
std::string bin_bytes(const std::vector<int64_t>& tokens) {
  std::string s;
  for (int64_t t : tokens) put(s, static_cast<T>(t));
  return s;
}

std::string write_pair(const std::string& name, const std::string& idx, const std::string& bin) {
  const std::string prefix = ::testing::TempDir() + name;
  std::ofstream(prefix + ".idx", std::ios::binary) << idx;
  std::ofstream(prefix + ".bin", std::ios::binary) << bin;
  return prefix;
}

std::vector<int32_t> all_tokens(const TokenDataset& d) {
  std::vector<int32_t> t(static_cast<size_t>(d.num_tokens()));
  d.read(0, d.num_tokens(), t.data());
  return t;
}

// Two documents, [5 6 7 EOT] and [1 2 EOT] with EOT = 9, as Megatron's preprocessing stores them.
const std::vector<int64_t> kTokens = {5, 6, 7, 9, 1, 2, 9};

template <typename T>
void expect_reads(uint8_t code, const std::string& name) {
  const int64_t w = sizeof(T);
  const std::string prefix =
      write_pair(name, idx_bytes(code, {4, 3}, {0, 4 * w}, {0, 1, 2}), bin_bytes<T>(kTokens));
  auto ds = MegatronDataset::open(prefix, 100, "model.vocab = 100");
  ASSERT_TRUE(ds.ok()) << ds.error();
  EXPECT_EQ((*ds)->num_tokens(), 7);
  EXPECT_EQ((*ds)->vocab(), 10);
  EXPECT_EQ((*ds)->index().documents(), 2u);
  EXPECT_EQ((*ds)->index().sequences, 2u);
  EXPECT_EQ(all_tokens(**ds), std::vector<int32_t>(kTokens.begin(), kTokens.end()));
  std::vector<int32_t> mid(3);
  (*ds)->read(2, 3, mid.data());
  EXPECT_EQ(mid, (std::vector<int32_t>{7, 9, 1}));
  EXPECT_EQ((*ds)->segments(), std::vector<int64_t>{7});
}

TEST(MegatronIndex, HandWrittenIndexReadsInEveryIntegerDtype) {
  expect_reads<uint8_t>(1, "hand_u8");
  expect_reads<int8_t>(2, "hand_i8");
  expect_reads<int16_t>(3, "hand_i16");
  expect_reads<int32_t>(4, "hand_i32");
  expect_reads<int64_t>(5, "hand_i64");
  expect_reads<uint16_t>(8, "hand_u16");
}

TEST(MegatronIndex, SeveralSequencesPerDocumentAndEmptySequences) {
  // Document 0 = sequences 0 and 1, document 1 = sequence 2 (empty) and 3.
  const std::string prefix = write_pair("multi", idx_bytes(8, {2, 2, 0, 3}, {0, 4, 8, 8}, {0, 2, 4}),
                                        bin_bytes<uint16_t>(kTokens));
  auto ds = MegatronDataset::open(prefix, 100, "model.vocab = 100");
  ASSERT_TRUE(ds.ok()) << ds.error();
  EXPECT_EQ((*ds)->index().documents(), 2u);
  EXPECT_EQ(all_tokens(**ds), std::vector<int32_t>(kTokens.begin(), kTokens.end()));
}

// Opening fails; the message names `file` and holds every needle.
void expect_refused(const std::string& prefix, const std::string& file, std::vector<std::string> needles,
                    int64_t vocab = 100) {
  auto ds = MegatronDataset::open(prefix, vocab, "model.vocab = " + std::to_string(vocab));
  ASSERT_FALSE(ds.ok()) << prefix;
  EXPECT_NE(ds.error().find(prefix + file), std::string::npos) << ds.error();
  for (const auto& n : needles) EXPECT_NE(ds.error().find(n), std::string::npos) << n << " in: " << ds.error();
}

TEST(MegatronIndex, BadInputNamesTheFileAndTheField) {
  const std::string good_idx = idx_bytes(8, {4, 3}, {0, 8}, {0, 1, 2});
  const std::string good_bin = bin_bytes<uint16_t>(kTokens);
  ASSERT_TRUE(MegatronDataset::open(write_pair("good", good_idx, good_bin), 100, "v").ok());
  // Truncated .idx: inside the header, and inside the arrays.
  expect_refused(write_pair("trunc_hdr", good_idx.substr(0, 20), good_bin), ".idx", {"truncated", "header"});
  expect_refused(write_pair("trunc_arr", good_idx.substr(0, good_idx.size() - 8), good_bin), ".idx",
                 {"truncated", "sequence count 2"});
  // Truncated .bin: the lengths promise more than it holds.
  expect_refused(write_pair("trunc_bin", good_idx, good_bin.substr(0, 10)), ".idx", {"pointers[1]", "past the end"});
  expect_refused(write_pair("short_bin", idx_bytes(8, {4, 2}, {0, 8}, {0, 1, 2}), good_bin), ".idx",
                 {"lengths", "14 bytes"});
  // A pointer past the end of the .bin.
  expect_refused(write_pair("ptr_past", idx_bytes(8, {4, 3}, {0, 4000}, {0, 1, 2}), good_bin), ".idx",
                 {"pointers[1]", "past the end of the .bin"});
  // Lengths and pointers that disagree (a gap between sequences).
  expect_refused(write_pair("disagree", idx_bytes(8, {3, 3}, {0, 8}, {0, 1, 2}), good_bin), ".idx",
                 {"pointers[1]", "disagrees with lengths"});
  expect_refused(write_pair("neg_len", idx_bytes(8, {-1, 3}, {0, 8}, {0, 1, 2}), good_bin), ".idx",
                 {"lengths[0]", "negative"});
  // Dtype: unknown code, and float codes.
  expect_refused(write_pair("dtype9", idx_bytes(9, {4, 3}, {0, 8}, {0, 1, 2}), good_bin), ".idx",
                 {"dtype", "unknown dtype code 9"});
  expect_refused(write_pair("dtype0", idx_bytes(0, {4, 3}, {0, 8}, {0, 1, 2}), good_bin), ".idx", {"dtype", "code 0"});
  expect_refused(write_pair("f32", idx_bytes(7, {4, 3}, {0, 16}, {0, 1, 2}), bin_bytes<float>(kTokens)), ".idx",
                 {"dtype", "float32"});
  expect_refused(write_pair("f64", idx_bytes(6, {4, 3}, {0, 32}, {0, 1, 2}), bin_bytes<double>(kTokens)), ".idx",
                 {"dtype", "float64"});
  // Magic, version, document indices.
  std::string bad_magic = good_idx;
  bad_magic[0] = 'X';
  expect_refused(write_pair("magic", bad_magic, good_bin), ".idx", {"magic"});
  expect_refused(write_pair("version", idx_bytes(8, {4, 3}, {0, 8}, {0, 1, 2}, 2), good_bin), ".idx",
                 {"version", "2"});
  expect_refused(write_pair("docs_end", idx_bytes(8, {4, 3}, {0, 8}, {0, 1}), good_bin), ".idx",
                 {"document_indices", "not the sequence count"});
  expect_refused(write_pair("docs_start", idx_bytes(8, {4, 3}, {0, 8}, {1, 2}), good_bin), ".idx",
                 {"document_indices[0]"});
  expect_refused(write_pair("docs_down", idx_bytes(8, {4, 3}, {0, 8}, {0, 2, 1, 2}), good_bin), ".idx",
                 {"document_indices[2]"});
  // Token ids: negative, and beyond the vocabulary (named in the .bin).
  const std::string neg_bin = bin_bytes<int16_t>({5, 6, -7, 9, 1, 2, 9});
  expect_refused(write_pair("neg_id", idx_bytes(3, {4, 3}, {0, 8}, {0, 1, 2}), neg_bin), ".bin",
                 {"token 2", "negative"});
  expect_refused(write_pair("big_id", good_idx, good_bin), ".bin", {"token 3", "id 9", "beyond", "model.vocab = 9"}, 9);
  // A missing .bin.
  const std::string lone = ::testing::TempDir() + "lone";
  std::ofstream(lone + ".idx", std::ios::binary) << good_idx;
  fs::remove(lone + ".bin");
  expect_refused(lone, ".bin", {"cannot open"});
}

TEST(MegatronIndex, WriterRoundTripsAndPicksTheDtype) {
  for (const int64_t vocab : {int64_t{300}, int64_t{65536}, int64_t{70000}}) {
    const std::string prefix = ::testing::TempDir() + "rt" + std::to_string(vocab);
    auto w = MegatronWriter::create(prefix, vocab);
    ASSERT_TRUE(w.ok()) << w.error();
    std::vector<std::vector<int32_t>> docs = {{1, 2, 3}, {}, {static_cast<int32_t>(vocab - 1), 0}, {7}};
    for (const auto& d : docs) {
      ASSERT_TRUE(w->add(d.data(), d.size()).is_ok());
      w->end_document();
    }
    ASSERT_TRUE(w->finish().is_ok());
    EXPECT_EQ(w->dtype(), vocab <= 65536 ? MegatronDtype::uint16 : MegatronDtype::int32);
    auto ds = MegatronDataset::open(prefix, vocab, "v");
    ASSERT_TRUE(ds.ok()) << ds.error();
    EXPECT_EQ((*ds)->index().dtype, w->dtype());
    EXPECT_EQ((*ds)->index().documents(), 4u);
    EXPECT_EQ((*ds)->index().length(1), 0);
    EXPECT_EQ((*ds)->index().length(2), 2);
    EXPECT_EQ(all_tokens(**ds), (std::vector<int32_t>{1, 2, 3, static_cast<int32_t>(vocab - 1), 0, 7}));
    EXPECT_EQ(fs::file_size(prefix + ".bin"), 6u * (vocab <= 65536 ? 2u : 4u));
  }
}

// The same files encoded to shards and to a Megatron prefix: the same stream
// (documents closed by the end-of-text token) and the same training windows.
TEST(MegatronIndex, EncodeGivesTheShardsStreamAndTheirWindows) {
  const BpeTokenizer tok = small_tokenizer();
  ASSERT_GE(tok.eot(), 0);
  std::vector<std::string> files;
  for (int i = 0; i < 3; ++i) {
    files.push_back(write_file("mdoc" + std::to_string(i) + ".txt", english_like(40 + static_cast<uint64_t>(i), 800)));
  }
  const std::string dir = ::testing::TempDir() + "m_shards";
  fs::remove_all(dir);
  EncodeOptions opts;
  ASSERT_TRUE(encode_to_shards(files, tok, dir, opts).ok());
  const std::string prefix = ::testing::TempDir() + "m_prefix";
  auto st = encode_to_megatron(files, tok, prefix, opts);
  ASSERT_TRUE(st.ok()) << st.error();
  EXPECT_EQ(st->documents[0], 3);
  auto shards = ShardDataset::open(dir, "train");
  ASSERT_TRUE(shards.ok()) << shards.error();
  auto meg = MegatronDataset::open(prefix, tok.vocab_size(), "v");
  ASSERT_TRUE(meg.ok()) << meg.error();
  const auto stream = all_tokens(**meg);
  EXPECT_EQ(stream, all_tokens(**shards));
  EXPECT_EQ((*meg)->index().documents(), 3u);
  // Each sequence is one document ending in the end-of-text token.
  int64_t at = 0;
  for (uint64_t s = 0; s < 3; ++s) {
    at += (*meg)->index().length(s);
    EXPECT_EQ(stream[static_cast<size_t>(at - 1)], tok.eot());
  }
  // Val fraction is refused for the one-split format.
  opts.val_fraction = 0.1;
  EXPECT_FALSE(encode_to_megatron(files, tok, prefix + "v", opts).ok());

  // open_training_data: the same windows, with the same held-out tail.
  const std::string tok_path = ::testing::TempDir() + "m_tok.json";
  ASSERT_TRUE(save_tokenizer(tok, tok_path).is_ok());
  TrainingDataOptions o;
  o.seq_len = 16;
  o.vocab = tok.vocab_size();
  o.seed = 5;
  o.val_fraction = 0.1;
  o.source = "run.toml";
  o.train = dir;
  auto a = open_training_data(o);
  ASSERT_TRUE(a.ok()) << a.error();
  o.train = prefix;
  o.tokenizer = tok_path;
  auto b = open_training_data(o);
  ASSERT_TRUE(b.ok()) << b.error();
  EXPECT_NE(b->train_description.find("Megatron"), std::string::npos);
  std::vector<int32_t> ta(16 * 64), tb(16 * 64), ga(16 * 64), gb(16 * 64);
  a->sampler->fill(3, 64, ta.data(), ga.data());
  b->sampler->fill(3, 64, tb.data(), gb.data());
  EXPECT_EQ(ta, tb);
  EXPECT_EQ(ga, gb);
  EXPECT_EQ(all_tokens(*a->val), all_tokens(*b->val));
  // Without data.tokenizer the prefix's ids (>= 256) are refused: no tokenizer to record.
  o.tokenizer.clear();
  auto c = open_training_data(o);
  ASSERT_FALSE(c.ok());
  EXPECT_NE(c.error().find("set data.tokenizer"), std::string::npos) << c.error();
  // A model.vocab below the tokenizer's is refused.
  o.tokenizer = tok_path;
  o.vocab = tok.vocab_size() - 1;
  auto v = open_training_data(o);
  ASSERT_FALSE(v.ok());
  EXPECT_NE(v.error().find("model.vocab"), std::string::npos) << v.error();
}

// A prefix of n byte tokens (vocab 256), values from a seeded pattern.
std::string byte_prefix(const std::string& name, int64_t n, int salt) {
  const std::string prefix = ::testing::TempDir() + name;
  auto w = MegatronWriter::create(prefix, 256);
  EXPECT_TRUE(w.ok());
  std::vector<int32_t> t(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) t[static_cast<size_t>(i)] = static_cast<int32_t>((i * 7 + salt * 13) % 251);
  EXPECT_TRUE(w->add(t.data(), t.size()).is_ok());
  EXPECT_TRUE(w->finish().is_ok());
  return prefix;
}

std::unique_ptr<BlendLoader> blend(const std::vector<std::pair<double, std::string>>& spec, uint64_t seed) {
  std::vector<BlendSource> sources;
  for (size_t i = 0; i < spec.size(); ++i) {
    auto ds = MegatronDataset::open(spec[i].second, 256, "v");
    EXPECT_TRUE(ds.ok()) << ds.error();
    sources.push_back(BlendSource{spec[i].first, std::move(*ds), "data.blend[" + std::to_string(i) + "]"});
  }
  auto l = BlendLoader::create(std::move(sources), 8, seed);
  EXPECT_TRUE(l.ok()) << l.error();
  return std::move(*l);
}

TEST(BlendLoader, GreedyOrderAchievesTheSharesAndIsDeterministic) {
  const std::string a = byte_prefix("blend_a", 3000, 1), b = byte_prefix("blend_b", 5000, 2);
  auto l = blend({{0.3, a}, {0.7, b}}, 11);
  EXPECT_DOUBLE_EQ(l->shares()[0], 0.3);
  // Megatron's greedy order for 0.3/0.7, worked by hand from the errors
  // w_s * max(j, 1) - count_s:  j=0: 0.3, 0.7 -> B;
  // j=1: 0.3, -0.3 -> A; j=2: 0.6-1=-0.4, 1.4-1=0.4 -> B; j=3: -0.1, 0.1 -> B.
  EXPECT_EQ(l->pick(0).source, 1);
  EXPECT_EQ(l->pick(1).source, 0);
  EXPECT_EQ(l->pick(2).source, 1);
  EXPECT_EQ(l->pick(3).source, 1);
  // Achieved shares within one sample of the weights at every prefix of the period.
  int64_t count[2] = {0, 0};
  for (int64_t g = 0; g < 3 * BlendLoader::kPeriod + 100; ++g) {
    const auto p = l->pick(g);
    EXPECT_EQ(p.sample, count[p.source]) << g;  // each source's samples in order, none skipped
    ++count[p.source];
    if (g % 997 == 0) {
      EXPECT_LE(std::abs(static_cast<double>(count[0]) - 0.3 * static_cast<double>(g + 1)), 2.0) << g;
    }
  }
  // Same inputs, same samples; another seed, other windows.
  auto l2 = blend({{3, a}, {7, b}}, 11);  // weights normalised
  auto l3 = blend({{0.3, a}, {0.7, b}}, 12);
  std::vector<int32_t> t1(8 * 50), t2(8 * 50), t3(8 * 50), g1(8 * 50);
  l->fill(1000, 50, t1.data(), g1.data());
  l2->fill(1000, 50, t2.data(), g1.data());
  l3->fill(1000, 50, t3.data(), g1.data());
  EXPECT_EQ(t1, t2);
  EXPECT_NE(t1, t3);
  EXPECT_EQ(l->state(80).data_fingerprint, l2->state(80).data_fingerprint);
}

TEST(BlendLoader, ResumesAtTheSameWindowAndRefusesOtherData) {
  const std::string a = byte_prefix("res_a", 2000, 3), b = byte_prefix("res_b", 4000, 4);
  auto run = blend({{0.5, a}, {0.25, b}}, 7);
  // 10 steps of 4 samples, then a "restart": a fresh loader from the saved state.
  std::vector<int32_t> want(8 * 4), tgt(8 * 4), got(8 * 4);
  run->fill(40, 4, want.data(), tgt.data());
  const LoaderState saved = run->state(40);
  auto again = blend({{0.5, a}, {0.25, b}}, 7);
  auto next = again->resume(saved, "ckpt/step_10");
  ASSERT_TRUE(next.ok()) << next.error();
  EXPECT_EQ(*next, 40);
  again->fill(*next, 4, got.data(), tgt.data());
  EXPECT_EQ(got, want);
  // Other weights or other seed: refused, naming the checkpoint.
  auto other = blend({{0.5, a}, {0.5, b}}, 7);
  auto r = other->resume(saved, "ckpt/step_10");
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.error().find("ckpt/step_10"), std::string::npos);
  EXPECT_NE(r.error().find("data.blend"), std::string::npos);
  EXPECT_FALSE(blend({{0.5, a}, {0.25, b}}, 8)->resume(saved, "c").ok());
}

TEST(BlendLoader, OneSourceBlendReadsWhatTheSourceAloneReads) {
  const std::string a = byte_prefix("one_a", 3000, 5);
  auto l = blend({{2.0, a}}, 9);
  auto ds = MegatronDataset::open(a, 256, "v");
  ASSERT_TRUE(ds.ok());
  auto plain = TokenLoader::create(**ds, 8, 9, "a");
  ASSERT_TRUE(plain.ok());
  std::vector<int32_t> x(8 * 30), y(8 * 30), t(8 * 30);
  l->fill(5, 30, x.data(), t.data());
  (*plain)->fill(5, 30, y.data(), t.data());
  EXPECT_EQ(x, y);
}

TEST(BlendLoader, WeightsMustBePositive) {
  const std::string a = byte_prefix("w_a", 200, 6);
  for (const double w : {0.0, -0.5}) {
    std::vector<BlendSource> sources;
    auto ds = MegatronDataset::open(a, 256, "v");
    ASSERT_TRUE(ds.ok());
    sources.push_back(BlendSource{w, std::move(*ds), "data.blend[0] = \"w_a\""});
    auto l = BlendLoader::create(std::move(sources), 8, 1);
    ASSERT_FALSE(l.ok());
    EXPECT_NE(l.error().find("data.blend[0]"), std::string::npos) << l.error();
    EXPECT_NE(l.error().find("not positive"), std::string::npos) << l.error();
  }
}

TEST(BlendLoader, TrainingDataOpensABlendWithItsVal) {
  const std::string a = byte_prefix("td_a", 3000, 7), b = byte_prefix("td_b", 3000, 8);
  const std::string val = write_file("td_val.txt", english_like(3, 400));
  TrainingDataOptions o;
  o.seq_len = 8;
  o.vocab = 256;
  o.seed = 3;
  o.source = "run.toml";
  o.blend = {{1, a}, {3, b}};
  o.val = val;
  auto d = open_training_data(o);
  ASSERT_TRUE(d.ok()) << d.error();
  EXPECT_EQ(d->train, nullptr);
  EXPECT_NE(d->train_description.find("0.7500"), std::string::npos) << d->train_description;
  std::vector<int32_t> t(8 * 4), g(8 * 4);
  d->sampler->fill(0, 4, t.data(), g.data());
  o.blend = {{1, a}, {1, ::testing::TempDir() + "no_such_prefix"}};
  auto bad = open_training_data(o);
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.error().find("data.blend[1]"), std::string::npos) << bad.error();
}

}  // namespace
}  // namespace tera
