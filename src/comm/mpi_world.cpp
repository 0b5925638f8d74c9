// The MPI world (world.h: make_mpi_world): MPI_Init with the two settings made
// before it (Open MPI's all-reduce algorithm, glibc's malloc thresholds; each
// explained where it is made), MPI_Abort as the job's abort, the node's ranks
// and MPI_Finalize; and whether the MPI library takes device pointers.
#include <mpi.h>
#if __has_include(<mpi-ext.h>)
#include <mpi-ext.h>  // Open MPI's MPIX_Query_cuda_support, where built with CUDA
#endif
#include <malloc.h>

#include <cstdlib>
#include <memory>
#include <string>

#include "comm/job_abort.h"
#include "comm/mpi_internal.h"
#include "comm/world.h"
#include "core/check.h"

namespace tera {

namespace mpi {

namespace {

class MpiWorld final : public CommWorld {
 public:
  MpiWorld() {
    // Open MPI 4.1's non-blocking all-reduce (coll/libnbc) picks a binomial
    // tree (reduce the whole buffer to rank 0, then broadcast) whenever the
    // buffer is in place or there are fewer than 4 ranks, which is every
    // ZeRO-0 gradient bucket. Reduce-scatter + all-gather (Rabenseifner)
    // moves 2(p-1)/p of the buffer and spreads the reduction; libnbc falls
    // back to a ring where it does not apply. 2 ranks, 7 MB: 2 ms instead of
    // 8. An explicit setting in the environment or on the mpirun line wins.
    setenv("OMPI_MCA_coll_libnbc_iallreduce_algorithm", "3", 0);
    // Open MPI allocates a scratch buffer the size of the message for every
    // non-blocking reduction and frees it at the end. With several in flight,
    // glibc serves each from fresh mmap()ed pages and unmaps it afterwards,
    // so every operation pays a page fault per 4 KiB (the receiver's copy and
    // the reduction both touch it first): 2 ranks, ZeRO-0, 43 MB of gradients
    // took 65 ms a step that way instead of about 10. Keep blocks up to 32 MiB
    // (glibc's largest threshold) on the heap, and keep freed heap memory.
    mallopt(M_MMAP_THRESHOLD, 32 << 20);
    mallopt(M_TRIM_THRESHOLD, 1 << 30);
    int provided = 0;
    TERA_MPI_CHECK(MPI_Init_thread(nullptr, nullptr, MPI_THREAD_FUNNELED, &provided));
    set_job_abort([](int code) { MPI_Abort(MPI_COMM_WORLD, code); });
    TERA_ASSERT(provided >= MPI_THREAD_FUNNELED, "MPI does not provide MPI_THREAD_FUNNELED");
    world_ = make_mpi_comm(MPI_COMM_WORLD, "world", false, policy_);
    MPI_Comm node;
    TERA_MPI_CHECK(MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, 0, MPI_INFO_NULL, &node));
    TERA_MPI_CHECK(MPI_Comm_size(node, &local_size_));
    TERA_MPI_CHECK(MPI_Comm_rank(node, &local_rank_));
    MPI_Comm_free(&node);
    char name[MPI_MAX_PROCESSOR_NAME];
    int len = 0;
    MPI_Get_processor_name(name, &len);
    host_.assign(name, static_cast<size_t>(len));
  }
  ~MpiWorld() override {
    world_.reset();
    MPI_Finalize();
  }
  Communicator& world() override { return *world_; }
  int local_size() const override { return local_size_; }
  int local_rank() const override { return local_rank_; }
  bool is_mpi() const override { return true; }
  std::string host() const override { return host_; }
  [[noreturn]] void abort(int code) override {
    MPI_Abort(MPI_COMM_WORLD, code);
    std::_Exit(code);
  }
  void set_comm_timeout(double seconds) override { policy_->timeout_s = seconds; }

 private:
  std::shared_ptr<WatchdogPolicy> policy_ = std::make_shared<WatchdogPolicy>();
  std::unique_ptr<Communicator> world_;
  int local_size_ = 1;
  int local_rank_ = 0;
  std::string host_;
};

}  // namespace

}  // namespace mpi

std::unique_ptr<CommWorld> make_mpi_world() { return std::make_unique<mpi::MpiWorld>(); }

bool mpi_library_takes_device_pointers(const std::string& vendor) {
  if (vendor == "cuda") {
#if defined(MPIX_CUDA_AWARE_SUPPORT) && MPIX_CUDA_AWARE_SUPPORT
    if (MPIX_Query_cuda_support() == 1) return true;
#endif
  }
  if (vendor == "hip") {
#if defined(MPIX_ROCM_AWARE_SUPPORT) && MPIX_ROCM_AWARE_SUPPORT
    if (MPIX_Query_rocm_support() == 1) return true;
#endif
  }
  // Cray MPICH (Frontier): GPU support is switched on for the job.
  const char* cray = std::getenv("MPICH_GPU_SUPPORT_ENABLED");
  return !vendor.empty() && cray != nullptr && std::string(cray) == "1";
}

}  // namespace tera
