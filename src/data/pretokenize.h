// Pre-tokenisation: the pieces BPE merges within, one scanner per pattern a
// byte-level BPE tokenizer is published with. Each gives the same pieces as
// its regex over code points (Rust `regex`/`fancy-regex` semantics: \s is the
// Unicode White_Space property, \p{L} and \p{N} the general categories):
//
//   gpt2    's|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+
//           (GPT-2, Hugging Face's ByteLevel pre-tokenizer with use_regex)
//   cl100k  (?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}|
//           ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+
//           (tiktoken's cl100k_base; Llama 3 ships the same pattern)
//   qwen2   cl100k's with \p{N} for \p{N}{1,3}: every digit is its own piece
//
// Bytes that are not valid UTF-8 count as "other" characters, so the pieces
// always tile the input exactly. (?i:...) folds ASCII case only (the
// contractions' letters have no other simple folding except U+017F, ſ).
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string_view>

namespace tera {

enum class Pretokenizer : uint8_t { gpt2, cl100k, qwen2 };

const char* pretokenizer_name(Pretokenizer p);
// "gpt2", "cl100k" (also spelled "cl100k_base" or "llama3") or "qwen2".
std::optional<Pretokenizer> pretokenizer_from_name(std::string_view name);
// The pattern whose regex text a tokenizer.json Split pre-tokenizer holds, or
// nullopt for a regex no scanner implements.
std::optional<Pretokenizer> pretokenizer_from_regex(std::string_view regex);
// The regex text of a pattern, as tokenizer.json files write it.
const char* pretokenizer_regex(Pretokenizer p);

// Length in bytes of the piece that starts at s[0, n), n >= 1.
size_t pretoken_length(Pretokenizer p, const uint8_t* s, size_t n);

// Calls f(std::string_view piece) for each piece of text, in order.
template <typename F>
void for_each_pretoken(Pretokenizer p, std::string_view text, F&& f) {
  const auto* s = reinterpret_cast<const uint8_t*>(text.data());
  size_t i = 0;
  while (i < text.size()) {
    const size_t len = pretoken_length(p, s + i, text.size() - i);
    f(text.substr(i, len));
    i += len;
  }
}
template <typename F>
void for_each_pretoken(std::string_view text, F&& f) {
  for_each_pretoken(Pretokenizer::gpt2, text, static_cast<F&&>(f));
}

// True when a piece starts at text[pos] whatever bytes come before text or
// after it, under every pattern above: an ASCII space after an ASCII
// non-space byte. (The piece that holds text[pos - 1] cannot take the space:
// a letter, number or contraction run stops at it, and a punctuation run
// takes only \r and \n after it.) Cutting a text at such points and
// pre-tokenising the parts gives the same pieces as the whole, which lets
// chunks of one file be encoded in parallel.
inline bool is_safe_split(std::string_view text, size_t pos) {
  if (pos == 0 || pos >= text.size()) return false;
  const auto c = static_cast<uint8_t>(text[pos]), p = static_cast<uint8_t>(text[pos - 1]);
  const bool p_space = p == ' ' || (p >= 0x09 && p <= 0x0D);
  return c == ' ' && p < 0x80 && !p_space;
}

// The first safe split at or after `from`, or npos.
size_t find_safe_split(std::string_view text, size_t from);
// The last safe split in [lowest, until] (lowest >= 1), or npos.
size_t rfind_safe_split(std::string_view text, size_t until, size_t lowest = 1);

}  // namespace tera
