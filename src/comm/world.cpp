// CommWorld::init: the MPI world under an MPI launcher (mpi_world.cpp, in
// builds with MPI), otherwise one rank on an in-process world. A build
// without MPI (TERA_GPU_NODE) refuses an MPI launch: every rank would train
// alone and write the same outputs.
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string>
#include <utility>

#include "comm/in_process_comm.h"
#include "comm/world.h"

namespace tera {

namespace {

class SingleWorld final : public CommWorld {
 public:
  SingleWorld() : local_(1), world_(local_.communicator(0)) {
    char h[256] = "localhost";
    gethostname(h, sizeof(h) - 1);
    host_ = h;
  }
  Communicator& world() override { return *world_; }
  int local_size() const override { return 1; }
  int local_rank() const override { return 0; }
  bool is_mpi() const override { return false; }
  std::string host() const override { return host_; }
  [[noreturn]] void abort(int code) override { std::_Exit(code); }

 private:
  InProcessWorld local_;
  std::unique_ptr<Communicator> world_;
  std::string host_;
};

}  // namespace

bool launched_by_mpi() {
  for (const char* v : {"OMPI_COMM_WORLD_SIZE", "PMIX_RANK", "PMI_RANK", "PMI_SIZE", "MPI_LOCALNRANKS"}) {
    if (std::getenv(v) != nullptr) return true;
  }
  const char* ntasks = std::getenv("SLURM_NTASKS");
  return std::getenv("SLURM_PROCID") != nullptr && ntasks != nullptr && std::atoi(ntasks) > 1;
}

namespace {

// The integer value of an environment variable, or -1.
int env_int(const char* name) {
  const char* v = std::getenv(name);
  if (v == nullptr || *v == '\0') return -1;
  char* end = nullptr;
  const long n = std::strtol(v, &end, 10);
  return *end == '\0' && n >= 0 && n < (1 << 20) ? static_cast<int>(n) : -1;
}

// Slurm's SLURM_TASKS_PER_NODE ("4", "2(x3),1"): the tasks of the node
// SLURM_NODEID names, or -1.
int slurm_tasks_on_this_node() {
  const char* spec = std::getenv("SLURM_TASKS_PER_NODE");
  const int node = env_int("SLURM_NODEID");
  if (spec == nullptr || node < 0) return -1;
  int index = 0;
  for (const char* p = spec; *p != '\0';) {
    char* end = nullptr;
    const long tasks = std::strtol(p, &end, 10);
    if (end == p) return -1;
    long repeat = 1;
    if (*end == '(' && end[1] == 'x') {
      repeat = std::strtol(end + 2, &end, 10);
      if (*end != ')') return -1;
      ++end;
    }
    if (node < index + repeat) return static_cast<int>(tasks);
    index += static_cast<int>(repeat);
    if (*end == ',') ++end;
    p = end;
  }
  return -1;
}

}  // namespace

LocalPlace launcher_local_place() {
  if (!launched_by_mpi()) return {0, 1};
  const std::pair<const char*, const char*> pairs[] = {
      {"OMPI_COMM_WORLD_LOCAL_RANK", "OMPI_COMM_WORLD_LOCAL_SIZE"},
      {"MPI_LOCALRANKID", "MPI_LOCALNRANKS"},
      {"PMI_LOCAL_RANK", "PMI_LOCAL_SIZE"},
      {"PALS_LOCAL_RANKID", "PALS_LOCAL_SIZE"},
  };
  for (const auto& [rank, size] : pairs) {
    const int r = env_int(rank), n = env_int(size);
    if (r >= 0 && n > r) return {r, n};
  }
  const int r = env_int("SLURM_LOCALID"), n = slurm_tasks_on_this_node();
  if (r >= 0 && n > r) return {r, n};
  return {-1, -1};
}

#if !defined(TERA_HAVE_MPI)
bool mpi_library_takes_device_pointers(const std::string&) { return false; }
#endif

std::unique_ptr<CommWorld> CommWorld::init() {
#if defined(TERA_HAVE_MPI)
  if (launched_by_mpi()) return make_mpi_world();
#else
  if (launched_by_mpi()) {
    std::fprintf(stderr,
                 "tera: started by an MPI launcher (mpirun/srun with several tasks), but this tera was built "
                 "without MPI (TERA_GPU_NODE), so every rank would train alone and write the same files; run one "
                 "process, or build with Open MPI (scripts/setup, then scripts/build)\n");
    std::exit(2);
  }
#endif
  return std::make_unique<SingleWorld>();
}

}  // namespace tera
