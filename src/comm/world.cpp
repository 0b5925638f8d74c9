// CommWorld::init: the MPI world under an MPI launcher (mpi_comm.cpp, in
// builds with MPI), otherwise one rank on an in-process world. A build
// without MPI (TERA_GPU_NODE) refuses an MPI launch: every rank would train
// alone and write the same outputs.
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string>

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
