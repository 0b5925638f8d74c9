// Expected cost of failures at scale, for the scaling sweeps. Nodes fail
// independently and exponentially with mean time between failures M_node, so
// a job on n nodes fails with M_sys = M_node / n. It checkpoints every tau
// seconds of work (a write takes delta) and after a failure restarts (R) from
// the last checkpoint.
//   interval   tau = sqrt(2 * delta * M_sys)                      (Young 1974)
//   wall/work  M_sys * e^(R/M_sys) * (e^((tau + delta)/M_sys) - 1) / tau
//                                                   (Daly 2006, its complete model)
//   goodput    work / wall, the share of wall-clock time that advances training
// Daly's expression is exact for exponential failures (failures during a
// checkpoint or a restart included) and tends to 1 + delta/tau + (tau/2 + R)/M_sys,
// the first-order waste, when tau, delta, R << M_sys.
#pragma once

#include "core/status.h"

namespace tera {

struct FailureModel {
  double node_mtbf_s = 0;   // M_node
  double ckpt_write_s = 0;  // delta
  double restart_s = 0;     // R: reschedule, restart, read the checkpoint
};

struct FailureEstimate {
  int64_t nodes = 0;
  double system_mtbf_s = 0;  // M_sys
  double interval_s = 0;     // tau, work between checkpoints
  double goodput = 0;        // expected work / wall-clock time, in (0, 1]
};

// Fails naming the flag when a time is not positive (restart may be 0).
Status check_failure_model(const FailureModel& m);
FailureEstimate estimate_failures(const FailureModel& m, int64_t gpus, int gpus_per_node);

}  // namespace tera
