// A timeline of named spans on this rank, written later in the Chrome trace
// format (parallel/trace.h gathers and writes it). Spans are recorded by the
// pipeline executor (one per instruction) and by communicators (one per
// blocking wait on a collective or message).
#pragma once

#include <string>
#include <vector>

namespace tera {

class Trace {
 public:
  explicit Trace(int rank) : rank_(rank) {}
  // Times in seconds on the monotonic clock (core/timer.h now_seconds).
  void span(const std::string& name, const std::string& category, double t0, double t1, int mb = -1, int chunk = -1);
  // This rank's events as comma-separated Chrome trace JSON objects
  // (pid 0, tid = rank, "X" complete events, microseconds).
  std::string events_json() const;
  bool empty() const { return events_.empty(); }

 private:
  struct Event {
    std::string name, category;
    double t0, t1;
    int mb, chunk;
  };
  int rank_;
  std::vector<Event> events_;
};

}  // namespace tera
