// Failure reporting for TERA_ASSERT: prints host and pid so that a failure on
// one rank of a many-rank job can be traced, then aborts (core dump, non-zero).
#include "core/check.h"

#include <unistd.h>

#include <cstdio>
#include <cstdlib>

namespace tera {

void assert_fail(const char* expr, const char* file, int line, const std::string& msg) {
  char host[256] = "?";
  gethostname(host, sizeof(host) - 1);
  std::fprintf(stderr, "tera: internal error at %s:%d (host %s, pid %d): assertion `%s` failed%s%s\n",
               file, line, host, static_cast<int>(getpid()), expr, msg.empty() ? "" : ": ", msg.c_str());
  std::fflush(stderr);
  std::abort();
}

int64_t divide(int64_t n, int64_t d) {
  TERA_ASSERT(d > 0 && n % d == 0, "divide(" + std::to_string(n) + ", " + std::to_string(d) + ") is not exact");
  return n / d;
}

}  // namespace tera
