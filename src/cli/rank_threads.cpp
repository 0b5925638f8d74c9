// OpenMP threads per rank; see rank_threads.h.
#include "cli/rank_threads.h"

#include <omp.h>
#include <sched.h>

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <thread>

#include <fmt/format.h>

namespace tera::cli {

int available_cores() {
  cpu_set_t set;
  CPU_ZERO(&set);
  if (sched_getaffinity(0, sizeof(set), &set) == 0 && CPU_COUNT(&set) > 0) return CPU_COUNT(&set);
  return static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
}

ThreadChoice threads_per_rank(int ranks_on_node) {
  const int cores = available_cores(), ranks = std::max(1, ranks_on_node);
  const int fair = std::max(1, cores / ranks);
  if (std::getenv("OMP_NUM_THREADS") == nullptr) {
    return {fair, ranks > cores ? fmt::format(" ({} ranks share {} cores: oversubscribed)", ranks, cores) : ""};
  }
  const int asked = omp_get_max_threads();
  if (int64_t{asked} * ranks <= cores) return {asked, ""};
  return {fair, fmt::format(" (OMP_NUM_THREADS = {} x {} rank{} > {} core{} available: {} thread{} per rank instead, "
                            "which do not spin against each other)",
                            asked, ranks, ranks == 1 ? "" : "s", cores, cores == 1 ? "" : "s", fair, fair == 1 ? "" : "s")};
}

}  // namespace tera::cli
