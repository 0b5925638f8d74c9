// Ending the job from a device communicator (job_abort.h).
#include "comm/job_abort.h"

#include <unistd.h>

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <fmt/format.h>

namespace tera {

namespace {
std::atomic<void (*)(int)> g_abort_job{nullptr};
}  // namespace

void set_job_abort(void (*abort_job)(int code)) { g_abort_job.store(abort_job); }

void end_job(const Communicator& c, const std::string& message) {
  char host[256] = "?";
  gethostname(host, sizeof(host) - 1);
  std::fprintf(stderr, "tera: error: rank %d (host %s, pid %d): %s; ending the job\n", c.world_rank(c.rank()), host,
               static_cast<int>(getpid()), message.c_str());
  std::fflush(stderr);
  if (auto abort_job = g_abort_job.load()) abort_job(1);
  std::_Exit(1);
}

void end_job_after_hang(const Communicator& c, int peer, const std::string& op, double waited, double timeout_s,
                        const std::string& hint) {
  const std::string who = peer >= 0 ? fmt::format("world rank {}", c.world_rank(peer))
                                    : std::string("the other ranks of the group");
  end_job(c, fmt::format("{} on the {} group has waited {:.0f} s for {}, past train.comm_timeout_s = {:g}: that rank "
                         "is stopped, hung or dead (or much slower){}",
                         op, c.name(), waited, who, timeout_s, hint.empty() ? "" : "; " + hint));
}

}  // namespace tera
