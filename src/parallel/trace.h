// Writing a run's timelines (core/trace.h) as one Chrome trace file (opens in
// Perfetto or chrome://tracing): one track per rank, one span per pipeline
// instruction and per blocking collective, with micro-batch ids. The
// simulator writes the same format, so a measured and a simulated step can
// be opened side by side.
#pragma once

#include <string>

#include "comm/communicator.h"
#include "partition/parallel_layout.h"
#include "core/status.h"
#include "core/trace.h"

namespace tera {

// Gathers every rank's events to world rank 0, which writes `path`
// atomically, each rank's track named by its coordinates in `layout`
// ("rank 3 (pp 1, dp 0, tp 1)"). Collective over `world`.
Status write_chrome_trace(const std::string& path, Communicator& world, const Trace& local,
                          const ParallelLayout& layout);

}  // namespace tera
