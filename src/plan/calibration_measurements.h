// What `tera calibrate` measures on this machine, as plain data: the
// runtime's kernels alone and inside training steps (train/runtime_timings.h
// takes them), memory bandwidth and, under MPI, the links
// (train/calibration_measure.h); plan/local_preset.h fits the `local`
// cluster preset to them. Pure data, so the runtime that measures and the
// planner that fits share one definition (the one header of plan/ that
// train/ may include: docs/architecture.md).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "model/model_spec.h"
#include "plan/calibration_fit.h"

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
  std::vector<double> flat() const {
    std::vector<double> v;
    for (const auto& l : linear) {
      v.push_back(l.forward_s);
      v.push_back(l.backward_s);
    }
    for (const auto& m : memory) v.push_back(m.seconds);
    return v;
  }
  void set_flat(const std::vector<double>& v) {
    size_t i = 0;
    for (auto& l : linear) {
      l.forward_s = v[i++];
      l.backward_s = v[i++];
    }
    for (auto& m : memory) m.seconds = v[i++];
  }
};

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

struct MpiLink {
  double alpha = 0;  // seconds, one-way latency of a small message
  double bw = 0;     // bytes/s of large messages (after the latency)
};

// Everything one calibration measured (the means over ranks with MPI).
struct CalibrationMeasurements {
  int threads = 0;
  int ranks = 1;  // "GPUs" of the node: the MPI ranks, else 1
  bool mpi = false;
  std::string gemm_library;  // the CPU backend's, for the preset's header
  double memory_bytes = 0;   // the node's memory (MemTotal)
  RuntimeTimings rt;
  std::vector<InSituTimes> insitu;
  double bw = 0;  // STREAM triad bytes/s
  MpiLink link;   // ranks 0 <-> 1 ping-pong (mpi only)
  std::vector<TimedBytes> all_reduces;  // median per size, slowest rank (mpi only)
};

}  // namespace tera
