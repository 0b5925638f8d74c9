// Helpers shared by the data tests: seeded random text and a small trained
// tokenizer, so every test sees the same inputs.
#pragma once

#include <gtest/gtest.h>

#include <fstream>
#include <string>

#include "core/rng.h"
#include "data/bpe_trainer.h"
#include "data/pretokenize.h"

namespace tera::testing_util {

// English-like text: words from a small Zipf-ish vocabulary, punctuation,
// numbers, contractions, line breaks and some non-ASCII.
inline std::string english_like(uint64_t seed, size_t words) {
  static const char* const kWords[] = {
      "the", "of",   "and",   "a",   "to",   "in",  "is",    "you", "that", "it",    "he",   "was",  "for",   "on",
      "are", "as",   "with",  "his", "they", "I",   "at",    "be",  "this", "have",  "from", "or",   "one",   "had",
      "by",  "word", "but",   "not", "what", "all", "were",  "we",  "when", "your",  "can",  "said", "there", "use",
      "an",  "each", "which", "she", "do",   "how", "their", "if",  "café", "naïve", "日本"};
  static const char* const kSeps[] = {" ", " ", " ", " ", " ", ", ", ". ", "\n", "'s ", "! ", "  ", "\n\n", " 42 "};
  const PhiloxKey key = philox_key(seed, "english_like");
  std::string s;
  for (size_t i = 0; i < words; ++i) {
    const uint64_t r = philox_u64(key, i);
    const size_t n = sizeof(kWords) / sizeof(kWords[0]);
    const size_t w = static_cast<size_t>((r % n) * ((r >> 20) % n) / n);  // skewed towards the front
    if ((r >> 50) % 4 == 0) {  // a made-up word from syllables: a long tail of rarer words
      static const char* const kSyl[] = {"ka", "ri", "mon", "te", "sul", "phe", "dra", "no", "vi", "str", "el", "qu"};
      for (uint64_t k = 0, x = r >> 8; k < 1 + (r >> 56) % 3; ++k, x /= 12) s += kSyl[x % 12];
    } else {
      s += kWords[w];
    }
    s += kSeps[(r >> 40) % (sizeof(kSeps) / sizeof(kSeps[0]))];
  }
  return s;
}

// Random bytes: any value, so invalid UTF-8 included.
inline std::string random_bytes(uint64_t seed, size_t n) {
  const PhiloxKey key = philox_key(seed, "random_bytes");
  std::string s(n, '\0');
  for (size_t i = 0; i < n; ++i) s[i] = static_cast<char>(philox_u64(key, i) & 0xFF);
  return s;
}

inline WordCounts count_text(std::string_view text) {
  WordCounts wc;
  for_each_pretoken(text, [&](std::string_view p) { wc.add(p); });
  return wc;
}

inline BpeTokenizer small_tokenizer(int64_t vocab = 600) {
  BpeTrainOptions opt;
  opt.vocab_size = vocab;
  auto tok = train_bpe(count_text(english_like(1, 20000)), opt);
  EXPECT_TRUE(tok.ok()) << tok.error();
  return std::move(tok).value();
}

inline std::string write_file(const std::string& name, std::string_view text) {
  const std::string path = ::testing::TempDir() + name;
  std::ofstream(path, std::ios::binary) << text;
  return path;
}

}  // namespace tera::testing_util
