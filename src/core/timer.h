// Wall-clock timing on the monotonic clock. Device-event timers join this file
// when a GPU backend lands.
#pragma once

#include <chrono>

namespace tera {

inline double now_seconds() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

class Stopwatch {
 public:
  Stopwatch() : t0_(now_seconds()) {}
  void reset() { t0_ = now_seconds(); }
  double seconds() const { return now_seconds() - t0_; }
  double ms() const { return 1e3 * seconds(); }

 private:
  double t0_;
};

}  // namespace tera
