// --metrics: a run's record, one JSON object per step in a JSONL file. A
// resumed run keeps the lines up to its checkpoint's step and appends; a
// write that fails is the caller's to report (the record is incomplete).
#pragma once

#include <cstdint>
#include <fstream>
#include <string>

#include "core/status.h"
#include "train/trainer.h"

namespace tera::cli {

// Keeps the lines of a JSONL metrics file whose "step" is at most `step`
// (what a run resumed at `step` has already reported) and rewrites it
// atomically; the run then appends. A missing file, a FIFO or a device is
// left as it is.
Status truncate_metrics(const std::string& path, int64_t step);

// One step's JSON object appended to the metrics file; false when the write
// failed (a full disk), with errno set.
bool write_metrics_line(const StepStats& s, std::ofstream& metrics);

}  // namespace tera::cli
