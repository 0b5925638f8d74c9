// The Unicode classes GPT-2's pre-tokenizer tells apart: letters (\p{L}),
// numbers (\p{N}), white space (the Unicode White_Space property, which is
// what Python's `regex` and tiktoken read as \s) and everything else, plus a
// lenient UTF-8 decoder under which every byte belongs to exactly one unit.
#pragma once

#include <cstddef>
#include <cstdint>

namespace tera {

enum class CharClass : uint8_t { other, letter, number, space };

// Class of a code point; anything that is not a valid scalar value is `other`.
CharClass char_class(uint32_t cp);

inline constexpr uint32_t kInvalidCodePoint = 0xFFFFFFFFu;

struct Utf8Unit {
  uint32_t cp;   // kInvalidCodePoint for a byte that starts no valid sequence
  uint32_t len;  // bytes, 1..4
};

// Decodes the unit at s[0, n), n >= 1: a complete, shortest-form UTF-8
// sequence of a scalar value, or else the single byte s[0] as an invalid unit.
// An ASCII byte is always its own unit, so it never hides inside a sequence.
inline Utf8Unit utf8_next(const uint8_t* s, size_t n) {
  const uint8_t b0 = s[0];
  if (b0 < 0x80) return {b0, 1};
  auto cont = [&](size_t i) { return i < n && (s[i] & 0xC0) == 0x80; };
  if (b0 >= 0xC2 && b0 <= 0xDF && cont(1)) return {(uint32_t{b0} & 0x1Fu) << 6 | (s[1] & 0x3Fu), 2};
  if (b0 >= 0xE0 && b0 <= 0xEF && cont(1) && cont(2)) {
    const uint32_t cp = (uint32_t{b0} & 0x0Fu) << 12 | (s[1] & 0x3Fu) << 6 | (s[2] & 0x3Fu);
    if (cp >= 0x800 && (cp < 0xD800 || cp > 0xDFFF)) return {cp, 3};
  }
  if (b0 >= 0xF0 && b0 <= 0xF4 && cont(1) && cont(2) && cont(3)) {
    const uint32_t cp = (uint32_t{b0} & 0x07u) << 18 | (s[1] & 0x3Fu) << 12 | (s[2] & 0x3Fu) << 6 | (s[3] & 0x3Fu);
    if (cp >= 0x10000 && cp <= 0x10FFFF) return {cp, 4};
  }
  return {kInvalidCodePoint, 1};
}

}  // namespace tera
