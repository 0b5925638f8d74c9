// The pre-tokenizers as scanners; see pretokenize.h for the patterns.
// Alternatives are tried in each pattern's order, and each greedy run stops at
// the first code point of another class, as the regex does.
#include "data/pretokenize.h"

#include <cstring>

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

// Length of a contraction 's|'t|'re|'ve|'m|'ll|'d at s (ASCII case folded
// when fold), or 0.
inline size_t contraction_length(const uint8_t* s, size_t n, bool fold) {
  if (s[0] != '\'' || n < 2) return 0;
  const auto low = [fold](uint8_t c) { return fold && c >= 'A' && c <= 'Z' ? static_cast<uint8_t>(c | 0x20) : c; };
  const uint8_t a = low(s[1]);
  if (a == 's' || a == 't' || a == 'm' || a == 'd') return 2;
  if (n >= 3) {
    const uint8_t b = low(s[2]);
    if ((a == 'r' && b == 'e') || (a == 'v' && b == 'e') || (a == 'l' && b == 'l')) return 3;
  }
  return 0;
}

// End of the white-space run starting at 0 and the start of its last unit.
struct SpaceRun {
  size_t end, last_start;
};
inline SpaceRun space_run(const uint8_t* s, size_t n) {
  size_t i = 0, last_start = 0;
  while (i < n) {
    const Unit u = unit_at(s + i, n - i);
    if (u.cls != CharClass::space) break;
    last_start = i;
    i += u.len;
  }
  return {i, last_start};
}

// \s+(?!\S) | \s+ : a white-space run keeps its last character for the next
// piece when a non-space follows, unless the run is that one character.
inline size_t trailing_space_piece(const uint8_t* s, size_t n) {
  const SpaceRun r = space_run(s, n);
  if (r.end == n || r.last_start == 0) return r.end;
  return r.last_start;
}

inline bool is_cr_lf(uint8_t c) { return c == '\r' || c == '\n'; }

// GPT-2's pattern.
size_t gpt2_length(const uint8_t* s, size_t n) {
  // 's|'t|'re|'ve|'m|'ll|'d
  if (const size_t c = contraction_length(s, n, false)) return c;
  const Unit first = unit_at(s, n);
  // ` ?X+` for X = \p{L}, \p{N}, [^\s\p{L}\p{N}]: an optional ASCII space, then a run of one class.
  if (first.cls != CharClass::space) return run_end(s, n, first.len, first.cls);
  if (s[0] == ' ' && n > 1) {
    const Unit next = unit_at(s + 1, n - 1);
    if (next.cls != CharClass::space) return run_end(s, n, 1 + next.len, next.cls);
  }
  return trailing_space_piece(s, n);
}

// cl100k (digits = 3) and qwen2 (digits = 1).
size_t cl100k_length(const uint8_t* s, size_t n, int digits) {
  // (?i:'s|'t|'re|'ve|'m|'ll|'d)
  if (const size_t c = contraction_length(s, n, true)) return c;
  const Unit first = unit_at(s, n);
  // [^\r\n\p{L}\p{N}]?\p{L}+
  if (first.cls == CharClass::letter) return run_end(s, n, first.len, CharClass::letter);
  if (first.cls != CharClass::number && !is_cr_lf(s[0]) && first.len < n) {
    const Unit next = unit_at(s + first.len, n - first.len);
    if (next.cls == CharClass::letter) return run_end(s, n, first.len + next.len, CharClass::letter);
  }
  // \p{N}{1,digits}
  if (first.cls == CharClass::number) {
    size_t i = first.len;
    for (int d = 1; d < digits && i < n; ++d) {
      const Unit u = unit_at(s + i, n - i);
      if (u.cls != CharClass::number) break;
      i += u.len;
    }
    return i;
  }
  //  ?[^\s\p{L}\p{N}]+[\r\n]*
  size_t other_from = std::string_view::npos;
  if (first.cls == CharClass::other) {
    other_from = 0;
  } else if (s[0] == ' ' && n > 1 && unit_at(s + 1, n - 1).cls == CharClass::other) {
    other_from = 1;
  }
  if (other_from != std::string_view::npos) {
    size_t i = run_end(s, n, other_from, CharClass::other);
    while (i < n && is_cr_lf(s[i])) ++i;
    return i;
  }
  // \s*[\r\n]+ : through the last \r or \n of the white-space run.
  const SpaceRun r = space_run(s, n);
  for (size_t i = r.end; i > 0; --i) {
    if (is_cr_lf(s[i - 1])) return i;
  }
  return trailing_space_piece(s, n);
}

}  // namespace

const char* pretokenizer_name(Pretokenizer p) {
  switch (p) {
    case Pretokenizer::gpt2: return "gpt2";
    case Pretokenizer::cl100k: return "cl100k";
    case Pretokenizer::qwen2: return "qwen2";
  }
  return "?";
}

std::optional<Pretokenizer> pretokenizer_from_name(std::string_view name) {
  if (name == "gpt2") return Pretokenizer::gpt2;
  if (name == "cl100k" || name == "cl100k_base" || name == "llama3") return Pretokenizer::cl100k;
  if (name == "qwen2") return Pretokenizer::qwen2;
  return std::nullopt;
}

const char* pretokenizer_regex(Pretokenizer p) {
  switch (p) {
    case Pretokenizer::gpt2:
      return R"('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+)";
    case Pretokenizer::cl100k:
      return R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";
    case Pretokenizer::qwen2:
      return R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";
  }
  return "";
}

std::optional<Pretokenizer> pretokenizer_from_regex(std::string_view regex) {
  for (const Pretokenizer p : {Pretokenizer::gpt2, Pretokenizer::cl100k, Pretokenizer::qwen2}) {
    if (regex == pretokenizer_regex(p)) return p;
  }
  // tiktoken's own spelling of cl100k: the contractions' cases written out.
  if (regex == R"(('s|'S|'t|'T|'re|'rE|'Re|'RE|'ve|'vE|'Ve|'VE|'m|'M|'ll|'lL|'Ll|'LL|'d|'D)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)") {
    return Pretokenizer::cl100k;
  }
  return std::nullopt;
}

size_t pretoken_length(Pretokenizer p, const uint8_t* s, size_t n) {
  switch (p) {
    case Pretokenizer::gpt2: return gpt2_length(s, n);
    case Pretokenizer::cl100k: return cl100k_length(s, n, 3);
    case Pretokenizer::qwen2: return cl100k_length(s, n, 1);
  }
  return n;
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
