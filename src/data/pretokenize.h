// GPT-2 pre-tokenisation: the pieces BPE merges within. Same result as
// GPT-2's pattern  's|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+
// over code points, written as a scanner. Bytes that are not valid UTF-8 count
// as "other" characters, so the pieces always tile the input exactly.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string_view>

namespace tera {

// Length in bytes of the piece that starts at s[0, n), n >= 1.
size_t pretoken_length(const uint8_t* s, size_t n);

// Calls f(std::string_view piece) for each piece of text, in order.
template <typename F>
void for_each_pretoken(std::string_view text, F&& f) {
  const auto* s = reinterpret_cast<const uint8_t*>(text.data());
  size_t i = 0;
  while (i < text.size()) {
    const size_t len = pretoken_length(s + i, text.size() - i);
    f(text.substr(i, len));
    i += len;
  }
}

// True when a piece starts at text[pos] whatever bytes come before text or
// after it: an ASCII space or newline after an ASCII non-space byte. Cutting
// a text at such points and pre-tokenising the parts gives the same pieces as
// the whole, which lets chunks of one file be encoded in parallel.
inline bool is_safe_split(std::string_view text, size_t pos) {
  if (pos == 0 || pos >= text.size()) return false;
  const auto c = static_cast<uint8_t>(text[pos]), p = static_cast<uint8_t>(text[pos - 1]);
  const bool p_space = p == ' ' || (p >= 0x09 && p <= 0x0D);
  return (c == ' ' || c == '\n') && p < 0x80 && !p_space;
}

// The first safe split at or after `from`, or npos.
size_t find_safe_split(std::string_view text, size_t from);
// The last safe split in [lowest, until] (lowest >= 1), or npos.
size_t rfind_safe_split(std::string_view text, size_t until, size_t lowest = 1);

}  // namespace tera
