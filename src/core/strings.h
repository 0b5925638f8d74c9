// Small string helpers shared by the parsers of command-line lists
// ("tp=8,pp=4", "8,16,64") and of text files.
#pragma once

#include <charconv>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

namespace tera {

// The pieces of `text` between separators, empty ones included
// ("a,,b" -> {"a", "", "b"}; "" -> {""}).
inline std::vector<std::string> split(std::string_view text, char sep) {
  std::vector<std::string> out;
  size_t start = 0;
  while (true) {
    const size_t end = text.find(sep, start);
    out.emplace_back(text.substr(start, end == std::string_view::npos ? std::string_view::npos : end - start));
    if (end == std::string_view::npos) return out;
    start = end + 1;
  }
}

// s with ASCII letters in lower case (other bytes as they are).
inline std::string ascii_lower(std::string s) {
  for (char& c : s) {
    if (c >= 'A' && c <= 'Z') c = static_cast<char>(c - 'A' + 'a');
  }
  return s;
}

// Whether `needle` occurs in `hay`, ASCII case ignored.
inline bool contains_ignore_case(std::string_view hay, std::string_view needle) {
  return ascii_lower(std::string(hay)).find(ascii_lower(std::string(needle))) != std::string::npos;
}

// Whether `word` occurs in `hay` as a word of its own (no letter or digit
// just before or after it), ASCII case ignored: "NVL" in "H100 NVL" or
// "NVL72", not in "NVLink"; "NeMo" in "NeMo 2.0", not in "Nemotron".
inline bool contains_word_ignore_case(std::string_view hay, std::string_view word, bool digits_may_follow = false) {
  const std::string h = ascii_lower(std::string(hay)), w = ascii_lower(std::string(word));
  auto alpha = [](char c) { return (c >= 'a' && c <= 'z'); };
  auto digit = [](char c) { return c >= '0' && c <= '9'; };
  if (w.empty()) return false;
  for (size_t at = h.find(w); at != std::string::npos; at = h.find(w, at + 1)) {
    const size_t end = at + w.size();
    const bool before = at == 0 || !(alpha(h[at - 1]) || digit(h[at - 1]));
    const bool after = end == h.size() || !(alpha(h[end]) || (digit(h[end]) && !digits_may_follow));
    if (before && after) return true;
  }
  return false;
}

// True when all of s is a decimal integer (an optional '-' and digits, nothing
// else) that fits in 64 bits; v is then its value.
inline bool parse_int64(std::string_view s, int64_t& v) {
  const auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  return !s.empty() && ec == std::errc() && p == s.data() + s.size();
}

// A map keyed by strings that is looked up by std::string_view without
// making a string (heterogeneous lookup).
struct StringViewHash {
  using is_transparent = void;
  size_t operator()(std::string_view s) const { return std::hash<std::string_view>{}(s); }
};
template <typename V>
using StringMap = std::unordered_map<std::string, V, StringViewHash, std::equal_to<>>;

// Walks the lines of a text file held in memory: a line ends at '\n' (a '\r'
// before it is dropped; the last line needs no '\n'). Usage:
//   TextLines lines(text);
//   for (std::string_view line; lines.next(line);) use(line, lines.number());
class TextLines {
 public:
  explicit TextLines(std::string_view text) : text_(text) {}
  bool next(std::string_view& line) {
    if (pos_ >= text_.size()) return false;
    size_t end = text_.find('\n', pos_);
    if (end == std::string_view::npos) end = text_.size();
    line = text_.substr(pos_, end - pos_);
    if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
    pos_ = end + 1;
    ++number_;
    return true;
  }
  size_t number() const { return number_; }  // 1-based number of the line next() gave

 private:
  std::string_view text_;
  size_t pos_ = 0, number_ = 0;
};

}  // namespace tera
