// The process's place in the job. CommWorld::init starts MPI when the process
// was launched by an MPI launcher (mpirun/mpiexec, or srun through PMI/PMIx)
// and otherwise gives a one-rank world without touching MPI, so a plain
// `tera train` needs no launcher. One CommWorld per process, owned by the
// command that needs it; it is passed down, never global.
#pragma once

#include <memory>
#include <string>

#include "comm/communicator.h"

namespace tera {

class CommWorld {
 public:
  static std::unique_ptr<CommWorld> init();
  virtual ~CommWorld() = default;
  virtual Communicator& world() = 0;
  virtual int local_size() const = 0;  // ranks of this job on this node
  virtual int local_rank() const = 0;  // this rank's place among them (0 .. local_size - 1)
  virtual bool is_mpi() const = 0;
  virtual std::string host() const = 0;
  // Ends every rank of the job with `code` (MPI_Abort); the only way out for
  // a rank that cannot continue while others may be waiting on it.
  [[noreturn]] virtual void abort(int code) = 0;
  // The hang watchdog: a communication that waits longer than `seconds`
  // prints the rank, the operation, the group and the peer it waits for,
  // and ends the job (MPI only; one process never waits on another).
  virtual void set_comm_timeout(double seconds) {}
};

// The MPI world (mpi_world.cpp; only in builds with MPI). CommWorld::init
// calls it under an MPI launcher.
std::unique_ptr<CommWorld> make_mpi_world();

// True when an MPI launcher started this process (environment of mpirun,
// Hydra, PMI/PMIx or a multi-task srun).
bool launched_by_mpi();

// This process's place among the job's ranks on its node as the launcher
// says it (Open MPI's OMPI_COMM_WORLD_LOCAL_RANK/SIZE, Slurm's
// SLURM_LOCALID with SLURM_TASKS_PER_NODE, MPICH Hydra's MPI_LOCALRANKID/
// MPI_LOCALNRANKS, PMI_LOCAL_RANK/SIZE, PALS): known before MPI starts, so
// a GPU can be chosen before MPI_Init (a CUDA-aware MPI otherwise opens a
// context on GPU 0 in every rank). {0, 1} without a launcher; {-1, -1} when
// the launcher does not say.
struct LocalPlace {
  int rank = 0, size = 1;
};
LocalPlace launcher_local_place();

// Whether the MPI library takes device pointers of this vendor ("cuda",
// "hip"); mpi_world.cpp (builds with MPI only).
bool mpi_library_takes_device_pointers(const std::string& vendor);

}  // namespace tera
