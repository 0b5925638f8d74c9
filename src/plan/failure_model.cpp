// Young's interval and Daly's expected wall-clock time (see failure_model.h).
#include "plan/failure_model.h"

#include <cmath>

namespace tera {

Status check_failure_model(const FailureModel& m) {
  if (!(m.node_mtbf_s > 0)) return Status::error("--node-mtbf-hours must be > 0 (mean time between failures of one node)");
  if (!(m.ckpt_write_s > 0)) return Status::error("--ckpt-write-s must be > 0 (seconds to write one checkpoint)");
  if (!(m.restart_s >= 0)) return Status::error("--restart-s must be >= 0 (seconds to restart after a failure)");
  return ok_status();
}

FailureEstimate estimate_failures(const FailureModel& m, int64_t gpus, int gpus_per_node) {
  FailureEstimate e;
  e.nodes = (gpus + gpus_per_node - 1) / gpus_per_node;
  const double M = m.node_mtbf_s / static_cast<double>(e.nodes);
  e.system_mtbf_s = M;
  e.interval_s = std::sqrt(2 * m.ckpt_write_s * M);
  // expm1 keeps precision when (tau + delta) << M.
  const double wall_per_work = M * std::exp(m.restart_s / M) * std::expm1((e.interval_s + m.ckpt_write_s) / M) / e.interval_s;
  e.goodput = 1 / wall_per_work;
  return e;
}

}  // namespace tera
