// A Backend that wraps another and times every op (wall clock, per op kind),
// for `--profile` in benchmarks and `tera train`. Because a backend is a
// table of plain functions, the wrapper keeps its counters in one process-wide
// table: one profiling backend per process.
#pragma once

#include <string>

#include "kernels/backend.h"

namespace tera {

// The wrapped table; `inner` must outlive it.
const Backend& profiling_backend(const Backend& inner);
void profiling_reset();
// One line per op with calls, total ms and share, sorted by time.
std::string profiling_report();
// Seconds spent in one op kind since the last reset ("linear_forward", the
// names of the report); 0 for a name it does not know.
double profiling_seconds(const std::string& op);

}  // namespace tera
