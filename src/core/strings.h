// Small string helpers shared by the parsers of command-line lists
// ("tp=8,pp=4", "8,16,64").
#pragma once

#include <string>
#include <string_view>
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

}  // namespace tera
