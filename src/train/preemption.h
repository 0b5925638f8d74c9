// Stop signals: SIGINT (Ctrl-C), SIGTERM (what Slurm and most schedulers send
// before a time limit) and SIGUSR1 (what mpirun forwards to the ranks) set a
// flag; the trainer checks it after every step and inside evaluations
// (agreed over the world, so all ranks stop at the same point), writes a
// checkpoint and exits 0. A second stop signal exits at once with status
// 128 + signal: the last committed checkpoint is intact (writes are atomic),
// only the one being written is lost.
//
// Under Open MPI, a SIGTERM or SIGINT sent to mpirun is not forwarded: mpirun
// sends the ranks SIGCONT, then SIGTERM after odls_base_sigkill_timeout
// seconds (default 1) and SIGKILL after as many again. Send SIGUSR1 to
// mpirun (forwarded at once), or launch with
// `--mca odls_base_sigkill_timeout N` where N covers a checkpoint.
#pragma once

namespace tera {

// Installs the handlers (idempotent).
void install_preemption_handlers();
// Whether a signal arrived since install, and which (0: none).
int preemption_signal();
// "SIGINT", "SIGTERM", "SIGUSR1" (or "signal N").
const char* signal_name(int sig);

}  // namespace tera
