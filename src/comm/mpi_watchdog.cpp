// The MPI hang watchdog (mpi_internal.h): wait_all, the one way an MPI request
// is waited for, ends the job when a wait passes train.comm_timeout_s, naming
// the rank, the operation, the group and the rank it waits for; a
// collective's silent member is found by a roll call of the group, which
// every waiting rank answers from its poll loop. Main thread only.
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>
#include <fmt/format.h>

#include "comm/mpi_internal.h"
#include "core/timer.h"

namespace tera {

namespace mpi {

namespace {

constexpr int kRollCallAsk = 1, kRollCallAnswer = 2;
constexpr int kRollCallAnswerBytes = 128;

// The operation this rank waits in now ("" outside wait_all).
std::string& waiting_in() {
  static std::string op;
  return op;
}

// Answers every roll call pending on any group of this rank.
void answer_roll_calls() {
  for (const RollCall* rc : roll_calls()) {
    for (;;) {
      int pending = 0;
      MPI_Status st;
      TERA_MPI_CHECK(MPI_Iprobe(MPI_ANY_SOURCE, kRollCallAsk, rc->comm, &pending, &st));
      if (pending == 0) break;
      char ask = 0;
      TERA_MPI_CHECK(MPI_Recv(&ask, 1, MPI_CHAR, st.MPI_SOURCE, kRollCallAsk, rc->comm, MPI_STATUS_IGNORE));
      char answer[kRollCallAnswerBytes] = {};
      std::snprintf(answer, sizeof(answer), "%s", waiting_in().empty() ? "?" : waiting_in().c_str());
      // Small enough to go eagerly: never waits for the asker.
      TERA_MPI_CHECK(MPI_Send(answer, kRollCallAnswerBytes, MPI_CHAR, st.MPI_SOURCE, kRollCallAnswer, rc->comm));
    }
  }
}

// Asks every other member of `rc` what it waits in, for up to `grace`
// seconds (answering others' roll calls meanwhile); returns who did not
// answer, as "world rank 4" / "world ranks 4, 6" with what the others said,
// or "" when every member answered.
std::string roll_call(const RollCall& rc, double grace) {
  const int n = static_cast<int>(rc.world_ranks.size());
  std::vector<MPI_Request> asks, answers;
  std::vector<int> member;
  std::vector<std::array<char, kRollCallAnswerBytes>> said(static_cast<size_t>(n));
  char ask = 0;
  for (int r = 0; r < n; ++r) {
    if (r == rc.rank) continue;
    asks.emplace_back();
    answers.emplace_back();
    member.push_back(r);
    TERA_MPI_CHECK(MPI_Isend(&ask, 1, MPI_CHAR, r, kRollCallAsk, rc.comm, &asks.back()));
    TERA_MPI_CHECK(MPI_Irecv(said[static_cast<size_t>(r)].data(), kRollCallAnswerBytes, MPI_CHAR, r, kRollCallAnswer,
                             rc.comm, &answers.back()));
  }
  const double t0 = now_seconds();
  std::vector<int> got(answers.size(), 0);
  for (;;) {
    answer_roll_calls();
    bool all = true;
    for (size_t i = 0; i < answers.size(); ++i) {
      if (got[i] == 0) TERA_MPI_CHECK(MPI_Test(&answers[i], &got[i], MPI_STATUS_IGNORE));
      all = all && got[i] != 0;
    }
    if (all || now_seconds() - t0 > grace) break;
    usleep(1000);
  }
  std::string silent, others;
  int n_silent = 0;
  for (size_t i = 0; i < answers.size(); ++i) {
    const int w = rc.world_ranks[static_cast<size_t>(member[i])];
    if (got[i] == 0) {
      silent += (silent.empty() ? "" : ", ") + std::to_string(w);
      ++n_silent;
    } else {
      said[static_cast<size_t>(member[i])].back() = '\0';
      others += fmt::format("{}world rank {} waits in {}", others.empty() ? "" : "; ", w,
                            said[static_cast<size_t>(member[i])].data());
    }
  }
  // The requests still pending go with the job (the caller ends it).
  if (n_silent == 0) return "";
  return fmt::format("world rank{} {}, which did not answer a roll call of the group within {:.1f} s{}",
                     n_silent > 1 ? "s" : "", silent, grace, others.empty() ? "" : " (" + others + ")");
}

[[noreturn]] void report_hang(const WaitContext& c, const std::string& op, double waited) {
  char host[256] = "?";
  gethostname(host, sizeof(host) - 1);
  std::string peer = c.peer >= 0 ? fmt::format("world rank {}", c.peer) : "";
  if (peer.empty() && c.roll != nullptr) peer = roll_call(*c.roll, std::clamp(c.policy->timeout_s / 2, 0.5, 5.0));
  if (peer.empty()) peer = "one of the other ranks of the group (every member answered a roll call: one is much slower)";
  std::fprintf(stderr,
               "tera: error: rank %d (host %s, pid %d): %s has waited %.0f s for %s, past train.comm_timeout_s = "
               "%g; group %s. That rank is stopped, hung or dead (or much slower); ending the job\n",
               c.world_rank, host, static_cast<int>(getpid()), op.c_str(), waited, peer.c_str(), c.policy->timeout_s,
               c.group.c_str());
  std::fflush(stderr);
  MPI_Abort(MPI_COMM_WORLD, 1);
  std::_Exit(1);
}

}  // namespace

std::vector<const RollCall*>& roll_calls() {
  static std::vector<const RollCall*> all;
  return all;
}

void wait_all(int n, MPI_Request* reqs, const WaitContext& c, const std::string& op) {
  int done = 0;
  TERA_MPI_CHECK(MPI_Testall(n, reqs, &done, MPI_STATUSES_IGNORE));
  if (done != 0) return;
  double t0 = now_seconds(), last = t0;
  waiting_in() = op;
  for (;;) {
    TERA_MPI_CHECK(MPI_Testall(n, reqs, &done, MPI_STATUSES_IGNORE));
    if (done != 0) {
      waiting_in().clear();
      return;
    }
    // Polls are 200 us apart: a longer gap is time this rank itself was stopped, not time waited for others.
    const double now = now_seconds();
    if (now - last > 1.0) t0 += now - last;
    last = now;
    const double waited = now - t0;
    if (waited > c.policy->timeout_s) report_hang(c, op, waited);
    if (waited > 0.5) {
      answer_roll_calls();
      usleep(200);
    }
  }
}

}  // namespace mpi

}  // namespace tera
