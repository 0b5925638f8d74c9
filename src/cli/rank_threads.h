// OpenMP threads per rank: what the cores this process may run on hold.
// More threads than cores (ranks x threads > cores: OMP_NUM_THREADS, or a
// taskset / cpuset / --cpus-per-task narrower than the machine) spin
// against each other in OpenMP's barriers (a tiny step took 300x longer),
// so the threads are cut to fit, and the start-up line says so.
#pragma once

#include <string>

namespace tera::cli {

struct ThreadChoice {
  int threads = 1;
  std::string note;  // for the start-up line; empty when nothing to say
};

// The cores this process may run on (its affinity mask), not the machine's.
int available_cores();

// OMP_NUM_THREADS if it fits, else the available cores shared evenly among
// the job's ranks on this node.
ThreadChoice threads_per_rank(int ranks_on_node);

}  // namespace tera::cli
