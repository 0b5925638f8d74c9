// A Backend that wraps another and times every op (wall clock, per op of the
// op list, TERA_BACKEND_OPS), for `--profile` in benchmarks, `tera train` and
// `tera calibrate`. Every hook is forwarded to the inner backend as it is.
// On an asynchronous backend each timed op is bracketed by two
// synchronizations of the inner backend's stream, so the time is the op's
// own work, not its launch (and not what was queued before it).
#pragma once

#include <memory>
#include <string>

#include "kernels/backend.h"

namespace tera {

// The wrapper; `inner` must outlive it. Its counters are its own.
std::unique_ptr<Backend> make_profiling_backend(const Backend& inner);
// The functions below take the wrapper made above.
void profiling_reset(const Backend& profiled);
// One line per op with calls, total ms and share, sorted by time.
std::string profiling_report(const Backend& profiled);
// Seconds spent in one op since the last reset (kernel_op_name: "linear_forward",
// the names of the report); 0 for a name it does not know.
double profiling_seconds(const Backend& profiled, const std::string& op);

}  // namespace tera
