// Times the CPU runtime's own kernels (the Backend tera train calls) at the
// shapes transformer blocks use, for `tera calibrate`: linear forward and
// backward (the cost model's GEMMs) and LayerNorm, GeLU and bias-residual
// (its memory-bound ops) in isolation, and every kernel class inside real
// training steps (time_training). `tera calibrate` fits the cost model's efficiency parameters to these
// times, so the simulator prices what this runtime actually does rather than
// what a GEMM library or STREAM reaches in isolation.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/status.h"
#include "kernels/backend.h"
#include "model/model_spec.h"

namespace tera {

struct LinearTiming {
  int64_t N, I, O;   // y[N,O] = x[N,I] W[O,I]^T + b: the cost model's GEMM (m=N, n=O, k=I)
  double forward_s;  // best of the repeats
  double backward_s; // dx, dW and db together: two GEMMs in the cost model
};

struct MemoryOpTiming {
  const char* op;    // "layernorm_forward", ...
  double bytes;      // what the cost model counts for it (fp32)
  double seconds;
};

struct RuntimeTimings {
  std::vector<LinearTiming> linear;
  std::vector<MemoryOpTiming> memory;
  // Every measured time in a fixed order, for averaging over MPI ranks.
  std::vector<double> flat() const;
  void set_flat(const std::vector<double>& v);
};

// `rounds` passes over every shape, each op given `seconds_per_op / rounds`
// per pass (at least 3 calls) and timed by its median call; the fastest pass
// is kept, so a burst of load from elsewhere spoils one pass, not the figure.
RuntimeTimings time_runtime_ops(const Backend& be, double seconds_per_op, int rounds);

// Kernel time per training step of a real (single-rank) training run, split
// as the cost model's op classes: GEMMs (linear layers), attention, memory-
// bound ops (LayerNorm, GeLU, bias-residual, embedding, cross-entropy).
// Isolated kernels run hot in cache and back to back; inside a step they
// meet cold weights and the previous op's leftovers, and are slower.
struct InSituTimes {
  ModelConfig model;
  int64_t micro_batch = 0, micro_batches = 0;
  double gemm_s = 0, attention_s = 0, memory_s = 0;  // in the fastest timed step
  double step_s = 0;                                 // that step, whole
};
// Trains `model` on a corpus file (byte vocabulary) for `warmup` + `steps`
// steps with the profiling backend over `inner`; keeps the fastest of the
// last `steps`.
Expected<InSituTimes> time_training(const Backend& inner, const ModelConfig& model, int64_t micro_batch,
                                    int64_t micro_batches, int warmup, int steps, const std::string& corpus,
                                    const std::string& out_dir);

}  // namespace tera
