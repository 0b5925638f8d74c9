// Chrome trace of a simulated step in the format `tera train --trace` writes
// (core/trace.h events: "X" spans, pid 0, tid = world rank, microseconds,
// args {mb, chunk}; parallel/trace.h's file wrapper), so a simulated and a
// measured step open side by side in Perfetto. One track per pipeline stage:
// the rank (pp_rank = s, dp_rank = 0, tp_rank = 0); the stage's other tp ranks
// and every other replica run the same timeline (the simulation is of one
// replica), which each track's name says.
#pragma once

#include <string>
#include <vector>

#include "core/status.h"
#include "plan/layout.h"
#include "plan/simulator.h"

namespace tera {

// The span's name as the executor writes it: "F3.1", "B3.1", "sA3.1>2",
// "rG3.1<0", "reduce_grads", "optimizer_step"; and its category: compute,
// p2p, bubble (the receive's wait), comm.
std::string sim_span_name(const SimSpan& s);
const char* sim_span_category(const SimSpan& s);

// The whole file's text: {"traceEvents":[...],"displayTimeUnit":"ms"}.
std::string sim_trace_json(const std::vector<SimSpan>& spans, const ParallelLayout& l);
// Writes sim_trace_json atomically (core/file_util.h AtomicFile).
Status write_sim_trace(const std::string& path, const std::vector<SimSpan>& spans, const ParallelLayout& l);

}  // namespace tera
