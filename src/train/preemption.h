// Stop signals: SIGINT (Ctrl-C), SIGTERM (what Slurm and most schedulers send
// before a time limit), SIGUSR1 (what mpirun forwards to the ranks), SIGHUP
// (the terminal or ssh session went away) and SIGPIPE (stdout's reader went
// away; a write that finds it gone asks for the same, request_stop) set a
// flag; the trainer checks it after every step and inside evaluations
// (agreed over the world, so all ranks stop at the same point), writes a
// checkpoint and exits 0. A second request, a user asking again, exits at
// once with status 128 + signal: the last committed checkpoint is intact
// (writes are atomic), only the one being written is lost. What is not a
// second request: the same signal within kSameRequestSeconds of the first
// (GNU timeout signals its child and then the child's process group; a
// launcher may forward what the user also sent), and SIGHUP or SIGPIPE,
// which report a lost terminal or reader, never a user.
//
// Under Open MPI, a SIGTERM or SIGINT sent to mpirun is not forwarded: mpirun
// sends the ranks SIGCONT, then SIGTERM after odls_base_sigkill_timeout
// seconds (default 1) and SIGKILL after as many again. Send SIGUSR1 to
// mpirun (forwarded at once), or launch with
// `--mca odls_base_sigkill_timeout N` where N covers a checkpoint.
//
// Why the signals go to a thread of their own: oneDNN 2.6's sgemm (Debian
// 12's libdnnl2 2.6.3) corrupts the heap when a signal handler runs on a
// thread that is inside it. Measured on an AMD EPYC (Zen 5, AVX-512): a
// loop of small sgemm calls with a no-op SIGUSR2 handler, signalled every
// 0.5 ms, aborts within seconds ("corrupted size vs. prev_size"); without
// the signals it runs clean. A stop signal landing in a GEMM crashed a rank
// of the preemption test about once in 30 runs. So `tera train` blocks the
// stop signals in every thread that computes and receives them on one that
// does nothing else.
#pragma once

namespace tera {

// Copies of one signal that arrive within this many seconds are one request.
inline constexpr double kSameRequestSeconds = 1.0;

// Blocks the stop signals (SIGINT, SIGTERM, SIGUSR1, SIGHUP, SIGPIPE) in the calling thread, so in every
// thread it starts afterwards (MPI's, OpenMP's, the in-process ranks), and
// starts one thread that receives them. Call it first thing, before any
// other thread exists. Until install_preemption_handlers, a stop signal
// ends the process as it would by default; afterwards it is taken as below.
// Idempotent.
void route_stop_signals_to_a_thread();
// Arms the handling: the first stop signal sets the flag, a second request
// exits with 128 + signal (idempotent). Without routing, the same runs as a
// signal handler on whichever thread the signal lands.
void install_preemption_handlers();
// Whether a signal arrived since install, and which (0: none).
int preemption_signal();
// What a stop signal would do, for what the process finds itself: SIGPIPE
// when a write finds stdout's reader gone, SIGHUP when it finds the
// terminal gone (a blocked SIGPIPE never reaches the receiving thread).
// Async-signal-safe.
void request_stop(int sig);
// "SIGINT", "SIGTERM", "SIGUSR1", "SIGHUP", "SIGPIPE" (or "a stop signal").
const char* signal_name(int sig);

}  // namespace tera
