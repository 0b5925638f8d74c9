// BPE encode/decode and training: the heap-based encoder against a direct
// transcription of GPT-2's round-by-round bpe(), the incremental trainer
// against a trainer that recounts every pair for every merge, and exact
// round trips of arbitrary bytes.
#include <gtest/gtest.h>

#include <algorithm>
#include <map>

#include "bpe_test_util.h"
#include "data/bpe_tokenizer.h"
#include "data/bpe_trainer.h"

namespace tera {
namespace {

using namespace testing_util;

// GPT-2's bpe(): merge every occurrence of the lowest-ranked adjacent pair, left to right, until none is ranked.
std::vector<int32_t> reference_bpe(const BpeTokenizer& tok, std::string_view piece) {
  std::map<std::pair<int32_t, int32_t>, std::pair<size_t, int32_t>> rank;  // pair -> (rank, result)
  for (size_t r = 0; r < tok.merges().size(); ++r) {
    const auto m = tok.merges()[r];
    const std::string joined = tok.token(m.left) + tok.token(m.right);
    for (int32_t id = 0; id < tok.vocab_size(); ++id) {
      if (!tok.is_special(id) && tok.token(id) == joined) rank[{m.left, m.right}] = {r, id};
    }
  }
  std::vector<int32_t> w;
  for (char c : piece) w.push_back(tok.byte_token(static_cast<uint8_t>(c)));
  for (;;) {
    size_t best = SIZE_MAX;
    std::pair<int32_t, int32_t> pick;
    for (size_t i = 0; i + 1 < w.size(); ++i) {
      auto it = rank.find({w[i], w[i + 1]});
      if (it != rank.end() && it->second.first < best) {
        best = it->second.first;
        pick = it->first;
      }
    }
    if (best == SIZE_MAX) return w;
    std::vector<int32_t> next;
    for (size_t i = 0; i < w.size();) {
      if (i + 1 < w.size() && w[i] == pick.first && w[i + 1] == pick.second) {
        next.push_back(rank[pick].second);
        i += 2;
      } else {
        next.push_back(w[i++]);
      }
    }
    w = next;
  }
}

TEST(Bpe, EncoderMatchesGpt2RoundByRoundMerging) {
  const BpeTokenizer tok = small_tokenizer(400);
  const std::string text = english_like(7, 3000) + random_bytes(3, 500);
  int pieces = 0;
  for_each_pretoken(text, [&](std::string_view p) {
    if (pieces++ > 800) return;
    ASSERT_EQ(tok.encode(p), reference_bpe(tok, p)) << "piece '" << p << "'";
  });
}

TEST(Bpe, RoundByRoundRuleHoldsForMergesThatCreateLowerRankedPairs) {
  // Tokens: bytes, "ab", "aba", "abab". The merge (ab, a) is ranked before (a, b): GPT-2 still merges every
  // (a, b) of a round before it looks at the pairs that round created.
  std::vector<std::string> tokens(256);
  for (int b = 0; b < 256; ++b) tokens[static_cast<size_t>(b)] = std::string(1, static_cast<char>(b));
  tokens.push_back("ab");    // 256
  tokens.push_back("aba");   // 257
  tokens.push_back("abab");  // 258
  auto tok = BpeTokenizer::create(tokens, {{256, 'a'}, {'a', 'b'}, {256, 256}}, {}, "test");
  ASSERT_TRUE(tok.ok()) << tok.error();
  for (const char* w : {"abab", "ababa", "aab", "abababa", "bab"})
    EXPECT_EQ(tok->encode(w), reference_bpe(*tok, w)) << w;
  EXPECT_EQ(tok->encode("abab"), (std::vector<int32_t>{258}));
}

TEST(Bpe, RoundTripsEveryByteString) {
  const BpeTokenizer tok = small_tokenizer();
  const BpeTokenizer bytes = BpeTokenizer::bytes();
  EXPECT_TRUE(tok.encode("").empty());
  EXPECT_EQ(tok.decode(std::vector<int32_t>{}), "");
  EncodeCache cache;  // shared across inputs, as the corpus encoder uses it
  for (uint64_t t = 0; t < 300; ++t) {
    const std::string s = t % 3 == 0 ? random_bytes(t, t % 200) : english_like(t, t % 50) + random_bytes(t, t % 7);
    std::vector<int32_t> ids;
    tok.encode(s, ids, cache);
    ASSERT_EQ(ids, tok.encode(s));
    ASSERT_EQ(tok.decode(ids), s);
    ASSERT_EQ(bytes.decode(bytes.encode(s)), s);
    for (int32_t id : ids) ASSERT_FALSE(tok.is_special(id));
  }
  const auto ids = bytes.encode(std::string("\xff\x00z", 3));
  EXPECT_EQ(ids, (std::vector<int32_t>{255, 0, 'z'}));
}

TEST(Bpe, SpecialTokensAreStructureNotText) {
  const BpeTokenizer tok = small_tokenizer();
  ASSERT_GE(tok.eot(), 0);
  EXPECT_EQ(tok.token(tok.eot()), "<|endoftext|>");
  const auto ids = tok.encode("a <|endoftext|> b");
  EXPECT_EQ(std::count(ids.begin(), ids.end(), tok.eot()), 0);
  std::vector<int32_t> with = {tok.eot()};
  with.insert(with.end(), ids.begin(), ids.end());
  EXPECT_EQ(tok.decode(with), "a <|endoftext|> b");
  EXPECT_EQ(tok.decode(with, true), "<|endoftext|>a <|endoftext|> b");
}

// Trainer oracle: recount all pairs for every merge; ties go to the smaller (left, right).
std::vector<BpeMerge> reference_train(const WordCounts& wc, int64_t merges, int64_t min_freq) {
  std::vector<std::pair<std::vector<int32_t>, int64_t>> words;
  wc.for_each([&](std::string_view w, int64_t n) {
    std::vector<int32_t> s;
    for (char c : w) s.push_back(static_cast<uint8_t>(c));
    words.emplace_back(s, n);
  });
  std::vector<BpeMerge> out;
  for (int32_t z = 256; static_cast<int64_t>(out.size()) < merges; ++z) {
    std::map<std::pair<int32_t, int32_t>, int64_t> counts;
    for (const auto& [s, n] : words) {
      for (size_t i = 0; i + 1 < s.size(); ++i) counts[{s[i], s[i + 1]}] += n;
    }
    std::pair<int32_t, int32_t> best;
    int64_t best_n = 0;
    for (const auto& [p, n] : counts) {
      if (n > best_n) {
        best_n = n;
        best = p;
      }
    }
    if (best_n < min_freq) break;
    out.push_back({best.first, best.second});
    for (auto& [s, n] : words) {
      std::vector<int32_t> next;
      for (size_t i = 0; i < s.size();) {
        if (i + 1 < s.size() && s[i] == best.first && s[i + 1] == best.second) {
          next.push_back(z);
          i += 2;
        } else {
          next.push_back(s[i++]);
        }
      }
      s = next;
    }
  }
  return out;
}

TEST(BpeTrainer, IncrementalCountsEqualAFullRecount) {
  for (uint64_t seed : {1, 2, 3}) {
    std::string text = english_like(seed, 3000);
    if (seed == 3) text += " aaaaaaa aaaa aaaaa abababab ababa " + random_bytes(seed, 300);  // overlapping pairs
    const WordCounts wc = count_text(text);
    BpeTrainOptions opt;
    opt.vocab_size = 256 + 150 + 1;
    auto tok = train_bpe(wc, opt);
    ASSERT_TRUE(tok.ok()) << tok.error();
    const auto want = reference_train(wc, 150, opt.min_frequency);
    ASSERT_EQ(tok->merges().size(), want.size());
    for (size_t r = 0; r < want.size(); ++r) {
      ASSERT_EQ(tok->merges()[r].left, want[r].left) << "merge " << r;
      ASSERT_EQ(tok->merges()[r].right, want[r].right) << "merge " << r;
    }
  }
}

TEST(BpeTrainer, StopsWhenPairsRunOutAndChecksTheSize) {
  BpeTrainOptions opt;
  opt.vocab_size = 10000;
  auto tok = train_bpe(count_text("ab ab ab cd"), opt);
  ASSERT_TRUE(tok.ok());
  EXPECT_LT(tok->vocab_size(), 270);  // only a handful of pairs occur twice
  EXPECT_EQ(tok->token(tok->eot()), "<|endoftext|>");
  opt.vocab_size = 200;
  auto bad = train_bpe(count_text("x"), opt);
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.error().find("use at least 257"), std::string::npos) << bad.error();
}

TEST(BpeTrainer, MoreMergesCompressMore) {
  const std::string text = english_like(99, 5000);  // held-out text of the same kind
  double last = 1.0;                                // byte tokens
  for (int64_t vocab : {300, 500, 800}) {
    const BpeTokenizer tok = small_tokenizer(vocab);
    ASSERT_EQ(tok.vocab_size(), vocab);
    const double bytes_per_token = static_cast<double>(text.size()) / static_cast<double>(tok.encode(text).size());
    EXPECT_GT(bytes_per_token, last + 0.05) << "vocab " << vocab;
    last = bytes_per_token;
  }
  EXPECT_GT(last, 2.5);
}

}  // namespace
}  // namespace tera
