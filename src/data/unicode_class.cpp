// Code point classification: a byte table for the Basic Multilingual Plane,
// built once from the generated ranges, and binary search above it.
#include "data/unicode_class.h"

#include <algorithm>
#include <array>
#include <iterator>
#include <memory>

namespace tera {

namespace {

struct CodeRange {
  uint32_t first, last;  // inclusive
};

#include "data/unicode_tables.inc"

template <size_t N>
bool in_ranges(const CodeRange (&ranges)[N], uint32_t cp) {
  const auto* it = std::upper_bound(std::begin(ranges), std::end(ranges), cp,
                                    [](uint32_t c, const CodeRange& r) { return c < r.first; });
  return it != std::begin(ranges) && cp <= std::prev(it)->last;
}

CharClass classify_slow(uint32_t cp) {
  if (in_ranges(kLetterRanges, cp)) return CharClass::letter;
  if (in_ranges(kNumberRanges, cp)) return CharClass::number;
  if (in_ranges(kWhiteSpaceRanges, cp)) return CharClass::space;
  return CharClass::other;
}

const std::array<CharClass, 0x10000>& bmp_table() {
  static const auto table = [] {
    auto t = std::make_unique<std::array<CharClass, 0x10000>>();
    for (uint32_t cp = 0; cp < 0x10000; ++cp) (*t)[cp] = classify_slow(cp);
    return t;
  }();
  return *table;
}

}  // namespace

CharClass char_class(uint32_t cp) {
  if (cp < 0x10000) return bmp_table()[cp];
  if (cp > 0x10FFFF) return CharClass::other;
  return classify_slow(cp);
}

}  // namespace tera
