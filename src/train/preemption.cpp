// Stop-signal handling; see preemption.h.
#include "train/preemption.h"

#include <pthread.h>
#include <time.h>
#include <unistd.h>

#include <atomic>
#include <cstdint>
#include <csignal>
#include <cstdlib>
#include <thread>

namespace tera {

namespace {

// The only process-wide state: what a signal handler (or the thread that
// receives the signals) leaves for the trainer to read.
volatile std::sig_atomic_t g_signal = 0;
std::atomic<bool> g_armed{false};  // install_preemption_handlers has run
// The first request a user made (SIGINT, SIGTERM or SIGUSR1) and when, in
// CLOCK_MONOTONIC nanoseconds: lock-free atomics, safe in a handler.
std::atomic<int> g_user_signal{0};
std::atomic<int64_t> g_user_at_ns{0};

constexpr int kStopSignals[] = {SIGINT, SIGTERM, SIGUSR1, SIGHUP, SIGPIPE};

bool reports_a_lost_reader(int sig) { return sig == SIGHUP || sig == SIGPIPE; }

int64_t monotonic_ns() {
  timespec t{};
  clock_gettime(CLOCK_MONOTONIC, &t);  // async-signal-safe
  return int64_t{t.tv_sec} * 1000000000 + t.tv_nsec;
}

sigset_t stop_signals() {
  sigset_t set;
  sigemptyset(&set);
  for (int sig : kStopSignals) sigaddset(&set, sig);
  return set;
}

// The first stop signal sets the flag; a user's second request ends the
// process at once. Async-signal-safe only (write(2), _exit(2),
// clock_gettime(2), lock-free atomics): it also runs as a handler.
void take_stop_signal(int sig) {
  if (g_signal == 0) g_signal = sig;
  if (reports_a_lost_reader(sig)) return;  // never a user asking again
  const int64_t now = monotonic_ns();
  int first = 0;
  if (g_user_signal.compare_exchange_strong(first, sig)) {
    g_user_at_ns.store(now);
    return;
  }
  if (first == sig && now - g_user_at_ns.load() < static_cast<int64_t>(kSameRequestSeconds * 1e9)) return;  // one request
  static const char msg[] = "tera: second stop signal: exiting now; the last written checkpoint is intact\n";
  [[maybe_unused]] const ssize_t n = ::write(STDERR_FILENO, msg, sizeof(msg) - 1);
  ::_exit(128 + sig);
}

extern "C" void on_stop_signal(int sig) { take_stop_signal(sig); }

// The receiving thread of route_stop_signals_to_a_thread. Before the trainer
// arms the handling, a stop signal does what it would by default: it ends
// the process, killed by that signal.
void receive_stop_signals(sigset_t set) {
  for (;;) {
    int sig = 0;
    if (sigwait(&set, &sig) != 0) continue;
    if (!g_armed.load()) {
      std::signal(sig, SIG_DFL);
      sigset_t one;
      sigemptyset(&one);
      sigaddset(&one, sig);
      pthread_sigmask(SIG_UNBLOCK, &one, nullptr);
      std::raise(sig);
      ::_exit(128 + sig);  // not reached: the default action ends the process
    }
    take_stop_signal(sig);
  }
}

}  // namespace

void route_stop_signals_to_a_thread() {
  static std::atomic<bool> started{false};
  if (started.exchange(true)) return;
  const sigset_t set = stop_signals();
  pthread_sigmask(SIG_BLOCK, &set, nullptr);
  std::thread(receive_stop_signals, set).detach();
}

void install_preemption_handlers() {
  // A thread that does not block the stop signals (one started before
  // route_stop_signals_to_a_thread, or every thread where it was not called)
  // runs this handler; under routing it never runs on the compute threads.
  struct sigaction sa = {};
  sa.sa_handler = on_stop_signal;
  sigemptyset(&sa.sa_mask);
  sa.sa_flags = SA_RESTART;  // MPI progress and file writes continue after the handler
  for (int sig : kStopSignals) sigaction(sig, &sa, nullptr);
  g_armed.store(true);
}

int preemption_signal() { return g_signal; }

void request_stop(int sig) { take_stop_signal(sig); }

const char* signal_name(int sig) {
  switch (sig) {
    case SIGINT: return "SIGINT";
    case SIGTERM: return "SIGTERM";
    case SIGUSR1: return "SIGUSR1";
    case SIGHUP: return "SIGHUP";
    case SIGPIPE: return "SIGPIPE";
    default: return "a stop signal";
  }
}

}  // namespace tera
