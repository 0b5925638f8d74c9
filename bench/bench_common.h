// Pieces every kernel benchmark shares: the CPU it ran on, and the median
// wall time of a piece of work.
#pragma once

#include <algorithm>
#include <fstream>
#include <functional>
#include <string>
#include <vector>

#include "core/timer.h"

namespace tera::bench {

// /proc/cpuinfo's "model name" ("unknown" where there is none).
inline std::string cpu_model() {
  std::ifstream f("/proc/cpuinfo");
  std::string line;
  while (std::getline(f, line)) {
    if (line.rfind("model name", 0) == 0) return line.substr(line.find(':') + 2);
  }
  return "unknown";
}

// Median seconds of `repeats` runs of `once`, after one warm-up run.
inline double median_seconds(int repeats, const std::function<void()>& once) {
  once();
  std::vector<double> t;
  for (int r = 0; r < repeats; ++r) {
    Stopwatch w;
    once();
    t.push_back(w.seconds());
  }
  std::sort(t.begin(), t.end());
  return t[t.size() / 2];
}

}  // namespace tera::bench
