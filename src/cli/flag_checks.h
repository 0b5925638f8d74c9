// Numeric flags, checked before any work: every numeric flag of every
// subcommand is an integer or a finite real within a stated range, and a
// value outside it (nan, inf, too large for 64 bits, or merely beyond what
// the program can work with) is refused naming the flag and the range: CLI11
// reports a failed check as "--flag: <message>", a parse error, exit 2.
// Header-only: used by every cmd_*.cpp file.
#pragma once

#include <CLI/CLI.hpp>
#include <fmt/format.h>

#include <charconv>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <string>

namespace tera::cli {

// An integer in [lo, hi].
inline CLI::Validator int_in(int64_t lo, int64_t hi) {
  return CLI::Validator(
      [lo, hi](std::string& s) -> std::string {
        int64_t v = 0;
        const auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
        if (ec == std::errc() && p == s.data() + s.size() && v >= lo && v <= hi) return {};
        return fmt::format("must be an integer in [{}, {}], got {}", lo, hi, s);
      },
      fmt::format("INT in [{}, {}]", lo, hi));
}

// A finite real in [lo, hi].
inline CLI::Validator real_in(double lo, double hi) {
  return CLI::Validator(
      [lo, hi](std::string& s) -> std::string {
        char* end = nullptr;
        const double v = std::strtod(s.c_str(), &end);
        if (!s.empty() && end == s.c_str() + s.size() && std::isfinite(v) && v >= lo && v <= hi) return {};
        return fmt::format("must be a number in [{}, {}], got {}", lo, hi, s);
      },
      fmt::format("NUMBER in [{}, {}]", lo, hi));
}

}  // namespace tera::cli
