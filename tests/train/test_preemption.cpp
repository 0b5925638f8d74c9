// Stop signals under route_stop_signals_to_a_thread (train/preemption.h):
// no thread that computes ever runs their handler (oneDNN's sgemm corrupts
// the heap when one does), the first armed signal sets the flag, a second
// request exits at once (not the same signal again within a second, nor a
// lost terminal or reader), and before arming a signal ends the process as
// by default.
// Each case runs in a child process (death tests): routing changes the
// process's signal mask for good.
#include <gtest/gtest.h>
#include <pthread.h>
#include <unistd.h>

#include <chrono>
#include <csignal>
#include <thread>

#include "train/preemption.h"

namespace tera {
namespace {

bool blocks_stop_signals() {
  sigset_t cur;
  pthread_sigmask(SIG_BLOCK, nullptr, &cur);
  return sigismember(&cur, SIGINT) == 1 && sigismember(&cur, SIGTERM) == 1 && sigismember(&cur, SIGUSR1) == 1;
}

bool wait_for_flag(int sig) {
  for (int i = 0; i < 1000 && preemption_signal() != sig; ++i) std::this_thread::sleep_for(std::chrono::milliseconds(10));
  return preemption_signal() == sig;
}

class Preemption : public ::testing::Test {
 protected:
  void SetUp() override { GTEST_FLAG_SET(death_test_style, "threadsafe"); }
};

TEST_F(Preemption, StopSignalsAreBlockedInTheCallerAndEveryThreadItStarts) {
  EXPECT_EXIT(
      {
        route_stop_signals_to_a_thread();
        install_preemption_handlers();
        bool worker_blocks = false;
        std::thread([&] { worker_blocks = blocks_stop_signals(); }).join();
        if (!blocks_stop_signals()) _exit(1);
        if (!worker_blocks) _exit(2);
        kill(getpid(), SIGUSR1);  // process-directed: only the receiving thread may take it
        if (!wait_for_flag(SIGUSR1)) _exit(3);
        _exit(0);
      },
      ::testing::ExitedWithCode(0), "");
}

TEST_F(Preemption, ASecondStopSignalExitsAtOnceWith128PlusTheSignal) {
  EXPECT_EXIT(
      {
        route_stop_signals_to_a_thread();
        install_preemption_handlers();
        kill(getpid(), SIGTERM);
        if (!wait_for_flag(SIGTERM)) _exit(3);
        kill(getpid(), SIGUSR1);
        std::this_thread::sleep_for(std::chrono::seconds(10));
        _exit(0);
      },
      ::testing::ExitedWithCode(128 + SIGUSR1), "second stop signal: exiting now");
}

// GNU timeout signals its child, then the child's process group: the same
// signal twice within kSameRequestSeconds is one request (issue 35 row 2).
TEST_F(Preemption, TheSameSignalTwiceAtOnceIsOneRequest) {
  EXPECT_EXIT(
      {
        route_stop_signals_to_a_thread();
        install_preemption_handlers();
        kill(getpid(), SIGTERM);
        if (!wait_for_flag(SIGTERM)) _exit(3);
        kill(getpid(), SIGTERM);
        std::this_thread::sleep_for(std::chrono::milliseconds(300));
        _exit(preemption_signal() == SIGTERM ? 0 : 4);
      },
      ::testing::ExitedWithCode(0), "");
}

// The same signal once the window has passed is a user asking again.
TEST_F(Preemption, TheSameSignalAfterTheWindowIsASecondRequest) {
  EXPECT_EXIT(
      {
        route_stop_signals_to_a_thread();
        install_preemption_handlers();
        kill(getpid(), SIGINT);
        if (!wait_for_flag(SIGINT)) _exit(3);
        std::this_thread::sleep_for(std::chrono::duration<double>(kSameRequestSeconds + 0.2));
        kill(getpid(), SIGINT);
        std::this_thread::sleep_for(std::chrono::seconds(10));
        _exit(0);
      },
      ::testing::ExitedWithCode(128 + SIGINT), "second stop signal");
}

// SIGHUP and SIGPIPE (a lost terminal or reader) stop the run like SIGTERM,
// but are never a second request, before or after a user's signal; a write
// that finds its reader gone asks the same (issue 35 row 7).
TEST_F(Preemption, HangupAndBrokenPipeStopButNeverEscalate) {
  EXPECT_EXIT(
      {
        route_stop_signals_to_a_thread();
        install_preemption_handlers();
        request_stop(SIGPIPE);
        if (preemption_signal() != SIGPIPE) _exit(3);
        kill(getpid(), SIGHUP);
        kill(getpid(), SIGPIPE);
        kill(getpid(), SIGTERM);  // the user's first request
        std::this_thread::sleep_for(std::chrono::milliseconds(300));
        kill(getpid(), SIGHUP);
        std::this_thread::sleep_for(std::chrono::milliseconds(300));
        _exit(preemption_signal() == SIGPIPE ? 0 : 4);
      },
      ::testing::ExitedWithCode(0), "");
}

TEST_F(Preemption, BeforeArmingAStopSignalEndsTheProcessAsByDefault) {
  EXPECT_EXIT(
      {
        route_stop_signals_to_a_thread();
        kill(getpid(), SIGINT);
        std::this_thread::sleep_for(std::chrono::seconds(10));
        _exit(0);
      },
      ::testing::KilledBySignal(SIGINT), "");
}

TEST_F(Preemption, WithoutRoutingTheHandlerSetsTheFlag) {
  EXPECT_EXIT(
      {
        install_preemption_handlers();
        std::raise(SIGUSR1);  // runs the handler on this thread
        _exit(preemption_signal() == SIGUSR1 ? 0 : 1);
      },
      ::testing::ExitedWithCode(0), "");
}

}  // namespace
}  // namespace tera
