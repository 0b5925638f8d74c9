// The GPT-2 pre-tokenizer as a scanner; see pretokenize.h for the pattern.
// Alternatives are tried in the pattern's order, and each greedy run stops at
// the first code point of another class, as the regex does.
#include "data/pretokenize.h"

#include "data/unicode_class.h"

namespace tera {

namespace {

struct Unit {
  CharClass cls;
  uint32_t len;
};

inline Unit unit_at(const uint8_t* s, size_t n) {
  if (s[0] < 0x80) {
    const uint8_t c = s[0];
    if ((c | 0x20) >= 'a' && (c | 0x20) <= 'z') return {CharClass::letter, 1};
    if (c >= '0' && c <= '9') return {CharClass::number, 1};
    if (c == ' ' || (c >= 0x09 && c <= 0x0D)) return {CharClass::space, 1};
    return {CharClass::other, 1};
  }
  const Utf8Unit u = utf8_next(s, n);
  return {u.cp == kInvalidCodePoint ? CharClass::other : char_class(u.cp), u.len};
}

// End of the run of `cls` units starting at i.
inline size_t run_end(const uint8_t* s, size_t n, size_t i, CharClass cls) {
  while (i < n) {
    const Unit u = unit_at(s + i, n - i);
    if (u.cls != cls) break;
    i += u.len;
  }
  return i;
}

}  // namespace

size_t pretoken_length(const uint8_t* s, size_t n) {
  // 's|'t|'re|'ve|'m|'ll|'d
  if (s[0] == '\'' && n >= 2) {
    const uint8_t a = s[1];
    if (a == 's' || a == 't' || a == 'm' || a == 'd') return 2;
    if (n >= 3) {
      const uint8_t b = s[2];
      if ((a == 'r' && b == 'e') || (a == 'v' && b == 'e') || (a == 'l' && b == 'l')) return 3;
    }
  }
  const Unit first = unit_at(s, n);
  // ` ?X+` for X = \p{L}, \p{N}, [^\s\p{L}\p{N}]: an optional ASCII space, then a run of one class.
  if (first.cls != CharClass::space) return run_end(s, n, first.len, first.cls);
  if (s[0] == ' ' && n > 1) {
    const Unit next = unit_at(s + 1, n - 1);
    if (next.cls != CharClass::space) return run_end(s, n, 1 + next.len, next.cls);
  }
  // \s+(?!\S) | \s+ : a white-space run keeps its last character for the next
  // piece when a non-space follows, unless the run is that one character.
  size_t i = 0, last_start = 0;
  while (i < n) {
    const Unit u = unit_at(s + i, n - i);
    if (u.cls != CharClass::space) break;
    last_start = i;
    i += u.len;
  }
  if (i == n || last_start == 0) return i;
  return last_start;
}

size_t find_safe_split(std::string_view text, size_t from) {
  for (size_t p = from == 0 ? 1 : from; p < text.size(); ++p) {
    if (is_safe_split(text, p)) return p;
  }
  return std::string_view::npos;
}

size_t rfind_safe_split(std::string_view text, size_t until, size_t lowest) {
  if (text.size() < 2) return std::string_view::npos;
  if (lowest == 0) lowest = 1;
  for (size_t p = until < text.size() ? until : text.size() - 1; p >= lowest; --p) {
    if (is_safe_split(text, p)) return p;
  }
  return std::string_view::npos;
}

}  // namespace tera
