// Times the CPU runtime's own kernels (the Backend tera train calls) at the
// shapes transformer blocks use, for `tera calibrate`: linear forward and
// backward (the cost model's GEMMs) and LayerNorm, GeLU and bias-residual
// (its memory-bound ops) in isolation, and every kernel class inside real
// training steps (time_training). plan/local_preset.h fits the cost model's
// efficiency parameters to these times, so the simulator prices what this
// runtime actually does rather than what a GEMM library or STREAM reaches in
// isolation.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/status.h"
#include "kernels/backend.h"
#include "model/model_spec.h"
#include "plan/calibration_measurements.h"

namespace tera {

// `rounds` passes over every shape, each op given `seconds_per_op / rounds`
// per pass (at least 3 calls) and timed by its median call; the fastest pass
// is kept, so a burst of load from elsewhere spoils one pass, not the figure.
RuntimeTimings time_runtime_ops(const Backend& be, double seconds_per_op, int rounds);

// One training run's kernel time per step by op class (InSituTimes).
// Trains `model` on a corpus file (byte vocabulary) for `warmup` + `steps`
// steps with the profiling backend over `inner`; keeps the fastest of the
// last `steps`.
Expected<InSituTimes> time_training(const Backend& inner, const ModelConfig& model, int64_t micro_batch,
                                    int64_t micro_batches, int warmup, int steps, const std::string& corpus,
                                    const std::string& out_dir);

}  // namespace tera
