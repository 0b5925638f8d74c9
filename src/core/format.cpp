// Formatting helpers for logs.
#include "core/format.h"

#include <cmath>
#include <cstdio>

namespace tera {

std::string human_bytes(int64_t bytes) {
  const char* units[] = {"B", "KiB", "MiB", "GiB", "TiB", "PiB"};
  double v = static_cast<double>(bytes);
  int u = 0;
  while (std::abs(v) >= 1024.0 && u < 5) {
    v /= 1024.0;
    ++u;
  }
  char buf[32];
  std::snprintf(buf, sizeof(buf), u == 0 ? "%.0f %s" : "%.2f %s", v, units[u]);
  return buf;
}

std::string human_duration(double s) {
  char buf[32];
  if (!std::isfinite(s) || s < 0) return "?";
  if (s < 60) {
    std::snprintf(buf, sizeof(buf), "%.1fs", s);
  } else if (s < 3600) {
    std::snprintf(buf, sizeof(buf), "%dm%02ds", static_cast<int>(s) / 60, static_cast<int>(s) % 60);
  } else {
    std::snprintf(buf, sizeof(buf), "%dh%02dm", static_cast<int>(s) / 3600, static_cast<int>(s) % 3600 / 60);
  }
  return buf;
}

std::string human_count(double n) {
  char buf[32];
  const double a = std::abs(n);
  if (a >= 1e12) std::snprintf(buf, sizeof(buf), "%.2fT", n / 1e12);
  else if (a >= 1e9) std::snprintf(buf, sizeof(buf), "%.2fB", n / 1e9);
  else if (a >= 1e6) std::snprintf(buf, sizeof(buf), "%.2fM", n / 1e6);
  else if (a >= 1e3) std::snprintf(buf, sizeof(buf), "%.1fK", n / 1e3);
  else std::snprintf(buf, sizeof(buf), "%.0f", n);
  return buf;
}

}  // namespace tera
