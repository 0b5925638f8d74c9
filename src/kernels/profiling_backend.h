// A Backend that wraps another and times every op (wall clock, per op of the
// op list, TERA_BACKEND_OPS), for `--profile` in benchmarks, `tera train` and
// `tera calibrate`. Because a backend is a table of plain functions with no
// instance pointer, the wrapper keeps its counters in one process-wide table:
// one profiling backend per process, one rank's thread calling it (the
// device-ready Backend of issue 16, with instance state, removes this).
#pragma once

#include <string>

#include "kernels/backend.h"

namespace tera {

// The wrapped table; `inner` must outlive it.
const Backend& profiling_backend(const Backend& inner);
void profiling_reset();
// One line per op with calls, total ms and share, sorted by time.
std::string profiling_report();
// Seconds spent in one op since the last reset (kernel_op_name: "linear_forward",
// the names of the report); 0 for a name it does not know.
double profiling_seconds(const std::string& op);

}  // namespace tera
