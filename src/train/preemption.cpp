// Preemption signal handling; see preemption.h.
#include "train/preemption.h"

#include <csignal>

namespace tera {

namespace {

volatile std::sig_atomic_t g_signal = 0;  // the only process-wide state: a signal handler needs one

extern "C" void on_preempt(int sig) { g_signal = sig; }

}  // namespace

void install_preemption_handlers() {
  struct sigaction sa = {};
  sa.sa_handler = on_preempt;
  sigemptyset(&sa.sa_mask);
  sa.sa_flags = SA_RESTART;  // MPI progress and file writes continue after the handler
  sigaction(SIGTERM, &sa, nullptr);
  sigaction(SIGUSR1, &sa, nullptr);
}

int preemption_signal() { return g_signal; }

}  // namespace tera
