// Preemption: SIGTERM and SIGUSR1 (what Slurm sends before a time limit, and
// what mpirun forwards for SIGUSR1) set a flag; the trainer checks it after
// every step (agreed over the world, so all ranks stop at the same step),
// writes a checkpoint and exits 0. A second SIGTERM is not special: the run
// still stops at the end of the step.
#pragma once

namespace tera {

// Installs the handlers (idempotent).
void install_preemption_handlers();
// Whether a signal arrived since install, and which (0: none).
int preemption_signal();

}  // namespace tera
