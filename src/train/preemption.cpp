// Stop-signal handling; see preemption.h.
#include "train/preemption.h"

#include <unistd.h>

#include <csignal>
#include <initializer_list>
#include <cstdlib>

namespace tera {

namespace {

volatile std::sig_atomic_t g_signal = 0;  // the only process-wide state: a signal handler needs one

extern "C" void on_stop_signal(int sig) {
  if (g_signal != 0) {
    // Async-signal-safe only: write(2) and _exit(2).
    static const char msg[] = "tera: second stop signal: exiting now; the last written checkpoint is intact\n";
    [[maybe_unused]] const ssize_t n = ::write(STDERR_FILENO, msg, sizeof(msg) - 1);
    ::_exit(128 + sig);
  }
  g_signal = sig;
}

}  // namespace

void install_preemption_handlers() {
  struct sigaction sa = {};
  sa.sa_handler = on_stop_signal;
  sigemptyset(&sa.sa_mask);
  sa.sa_flags = SA_RESTART;  // MPI progress and file writes continue after the handler
  for (int sig : {SIGINT, SIGTERM, SIGUSR1}) sigaction(sig, &sa, nullptr);
}

int preemption_signal() { return g_signal; }

const char* signal_name(int sig) {
  switch (sig) {
    case SIGINT: return "SIGINT";
    case SIGTERM: return "SIGTERM";
    case SIGUSR1: return "SIGUSR1";
    default: return "a stop signal";
  }
}

}  // namespace tera
