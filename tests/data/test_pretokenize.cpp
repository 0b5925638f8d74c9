// GPT-2 pre-tokenizer: hand-checked cases of each alternative of the pattern,
// pieces that always tile the input (invalid UTF-8 included), and safe split
// points that never change the pieces.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "core/rng.h"
#include "data/pretokenize.h"
#include "data/unicode_class.h"

namespace tera {
namespace {

std::vector<std::string> pieces(std::string_view text, Pretokenizer pat = Pretokenizer::gpt2) {
  std::vector<std::string> out;
  for_each_pretoken(pat, text, [&](std::string_view p) { out.emplace_back(p); });
  return out;
}

constexpr Pretokenizer kPatterns[] = {Pretokenizer::gpt2, Pretokenizer::cl100k, Pretokenizer::qwen2};

using V = std::vector<std::string>;

TEST(Pretokenize, PatternAlternatives) {
  EXPECT_EQ(pieces(""), V{});
  EXPECT_EQ(pieces("Hello world"), (V{"Hello", " world"}));
  EXPECT_EQ(pieces("It's we'll I'm 'tis"), (V{"It", "'s", " we", "'ll", " I", "'m", " '", "tis"}));
  EXPECT_EQ(pieces("''s 'S"), (V{"''", "s", " '", "S"}));
  EXPECT_EQ(pieces("123abc 4.5"), (V{"123", "abc", " 4", ".", "5"}));
  EXPECT_EQ(pieces("!!x ?!"), (V{"!!", "x", " ?!"}));
  EXPECT_EQ(pieces("a  b"), (V{"a", " ", " b"}));
  EXPECT_EQ(pieces("x\n\ny"), (V{"x", "\n", "\n", "y"}));
  EXPECT_EQ(pieces("\t word"), (V{"\t", " word"}));
  EXPECT_EQ(pieces("end   "), (V{"end", "   "}));
  EXPECT_EQ(pieces("a \n\n  b"), (V{"a", " \n\n ", " b"}));
  EXPECT_EQ(pieces("café Straße"), (V{"café", " Straße"}));
  EXPECT_EQ(pieces("日本語 テキスト"), (V{"日本語", " テキスト"}));
  EXPECT_EQ(pieces("x\u00a0\u3000y"), (V{"x", "\u00a0", "\u3000", "y"}));  // Unicode white space
  EXPECT_EQ(pieces("\xc2\x85"), (V{"\xc2\x85"}));                          // U+0085 is White_Space
}

// cl100k (Llama 3): each case follows the regex's alternatives by hand.
TEST(Pretokenize, Cl100kPatternAlternatives) {
  const auto cl = [](std::string_view t) { return pieces(t, Pretokenizer::cl100k); };
  EXPECT_EQ(cl("Hello world"), (V{"Hello", " world"}));
  EXPECT_EQ(cl("It's I'M we'LL"), (V{"It", "'s", " I", "'M", " we", "'LL"}));  // (?i:...) contractions
  EXPECT_EQ(cl("12345 abc"), (V{"123", "45", " abc"}));                       // \p{N}{1,3}
  EXPECT_EQ(cl(".hello ..hello $x"), (V{".hello", " ..", "hello", " $", "x"}));  // one non-letter before letters, not two
  EXPECT_EQ(cl("\tfoo  foo"), (V{"\tfoo", " ", " foo"}));
  EXPECT_EQ(cl("a\n\nb"), (V{"a", "\n\n", "b"}));
  EXPECT_EQ(cl("x.\n\ny"), (V{"x", ".\n\n", "y"}));                             // punctuation takes its line ends
  EXPECT_EQ(cl("foo  \n  bar"), (V{"foo", "  \n", " ", " bar"}));                // \s*[\r\n]+, then \s+(?!\S)
  EXPECT_EQ(cl("end   "), (V{"end", "   "}));
  EXPECT_EQ(cl(" !?\r\nx"), (V{" !?\r\n", "x"}));
  EXPECT_EQ(cl("\n x"), (V{"\n", " x"}));
  EXPECT_EQ(cl("日本語 テキスト a1"), (V{"日本語", " テキスト", " a", "1"}));
  EXPECT_EQ(cl("\xff\xfe" "ab"), (V{"\xff\xfe", "ab"}));  // invalid bytes are "other" characters
  EXPECT_EQ(cl("\xff" "ab"), (V{"\xff" "ab"}));
}

TEST(Pretokenize, Qwen2SplitsEveryDigit) {
  EXPECT_EQ(pieces("x 2024!", Pretokenizer::qwen2), (V{"x", " ", "2", "0", "2", "4", "!"}));
  EXPECT_EQ(pieces("x 2024!", Pretokenizer::cl100k), (V{"x", " ", "202", "4", "!"}));
}

TEST(Pretokenize, PatternsAreNamedAndRecognised) {
  for (const Pretokenizer p : kPatterns) {
    EXPECT_EQ(pretokenizer_from_name(pretokenizer_name(p)), p);
    EXPECT_EQ(pretokenizer_from_regex(pretokenizer_regex(p)), p);
  }
  EXPECT_EQ(pretokenizer_from_name("llama3"), Pretokenizer::cl100k);
  EXPECT_FALSE(pretokenizer_from_name("o200k").has_value());
  EXPECT_FALSE(pretokenizer_from_regex("\\w+").has_value());
}

TEST(Pretokenize, InvalidUtf8IsOtherCharacters) {
  EXPECT_EQ(pieces("\xff\xfe a"), (V{"\xff\xfe", " a"}));
  EXPECT_EQ(pieces("ab\xc3"), (V{"ab", "\xc3"}));                // truncated sequence at the end
  EXPECT_EQ(pieces("\xe0\x80\x80z"), (V{"\xe0\x80\x80", "z"}));  // overlong: three invalid bytes
  EXPECT_EQ(pieces("\xed\xa0\x80!"), (V{"\xed\xa0\x80!"}));      // a surrogate is not a scalar value
}

TEST(Utf8, DecodesShortestFormScalarsOnly) {
  const auto dec = [](std::string_view s) { return utf8_next(reinterpret_cast<const uint8_t*>(s.data()), s.size()); };
  EXPECT_EQ(dec("\xe2\x82\xac").cp, 0x20ACu);
  EXPECT_EQ(dec("\xf0\x9f\x98\x80").len, 4u);
  EXPECT_EQ(dec("\xc0\xaf").cp, kInvalidCodePoint);
  EXPECT_EQ(dec("\xf4\x90\x80\x80").cp, kInvalidCodePoint);  // above U+10FFFF
  EXPECT_EQ(dec("\xe2\x82").len, 1u);
  EXPECT_EQ(char_class(0x0661), CharClass::number);  // Arabic-Indic digit one
  EXPECT_EQ(char_class(0x2167), CharClass::number);  // Roman numeral eight (Nl)
  EXPECT_EQ(char_class(0x1F600), CharClass::other);
  EXPECT_EQ(char_class(0x20000), CharClass::letter);  // CJK extension B
  EXPECT_EQ(char_class(0xFEFF), CharClass::other);    // not White_Space (JavaScript's \s differs here)
}

std::string random_text(PhiloxKey key, uint64_t n, bool with_invalid) {
  static const char* const kParts[] = {"a", "Z", "7", " ", "  ", "\n", "\t", "'", "'s", ".", "é", "日", "😀", "\u00a0"};
  std::string s;
  for (uint64_t i = 0; i < n; ++i) {
    const uint64_t r = philox_below(key, i, with_invalid ? 16 : 14);
    if (r >= 14) {
      s += static_cast<char>(0x80 + philox_below(key, i + (uint64_t{1} << 40), 128));
    } else {
      s += kParts[r];
    }
  }
  return s;
}

TEST(Pretokenize, PiecesTileEveryInput) {
  for (const Pretokenizer pat : kPatterns) {
    for (uint64_t t = 0; t < 200; ++t) {
      const std::string text = random_text(philox_key(t, "tile"), t % 97, true);
      std::string joined;
      for (const auto& p : pieces(text, pat)) {
        ASSERT_FALSE(p.empty());
        joined += p;
      }
      ASSERT_EQ(joined, text) << pretokenizer_name(pat);
    }
  }
}

TEST(Pretokenize, SafeSplitsDoNotChangePieces) {
  int checked = 0;
  for (const Pretokenizer pat : kPatterns) {
    for (uint64_t t = 0; t < 100; ++t) {
      const std::string text = random_text(philox_key(t, "split"), 60, t % 2 == 0);
      const V whole = pieces(text, pat);
      for (size_t p = 0; p <= text.size(); ++p) {
        if (!is_safe_split(text, p)) continue;
        V parts = pieces(std::string_view(text).substr(0, p), pat);
        const V right = pieces(std::string_view(text).substr(p), pat);
        parts.insert(parts.end(), right.begin(), right.end());
        ASSERT_EQ(parts, whole) << pretokenizer_name(pat) << ": split at " << p;
        ++checked;
      }
    }
  }
  EXPECT_GT(checked, 300);
  EXPECT_EQ(find_safe_split("ab cd", 0), 2u);
  EXPECT_EQ(rfind_safe_split("ab cd ef", 7), 5u);
  EXPECT_EQ(find_safe_split("a  b", 2), std::string::npos);  // inside a space run is not safe
}

}  // namespace
}  // namespace tera
