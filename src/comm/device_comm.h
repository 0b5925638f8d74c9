// The device communicator of a process group (DESIGN.md invariant 6): the
// one that carries tensors in the backend's device memory, beside the host
// communicator that carries host scalars, checkpoint gathers and bootstrap.
// Which it is follows from how the backend's memory is reached
// (core/device_memory.h) and what the build and the machine offer:
//   host         the host communicator itself (nothing to make);
//   mapped_host  a communicator over the host one that passes every buffer
//                pointer through the backend's to_host (cpu-guarded), so MPI
//                moves the real memory and host code still never
//                dereferences a device pointer;
//   device       by capability (choose_device_comm), never an abort:
//                  local   a group of one rank: nothing crosses a rank, so
//                          no library is needed (copies where a result
//                          lands elsewhere), and a single GPU needs no NCCL;
//                  nccl    the vendor library of a cuda backend, where built;
//                  rccl    a hip backend's, where found at build time;
//                  mpi     GPU-aware MPI: device pointers passed to MPI, where
//                          the MPI library reports that it takes them (or
//                          train.device_comm = "mpi" says so, as on Cray MPICH
//                          with MPICH_GPU_SUPPORT_ENABLED=1);
//                  staged  through pinned host memory over MPI
//                          (comm/staged_comm.h): works for any device backend.
//                "auto" takes the first that applies of nccl/rccl, mpi, staged.
#pragma once

#include <memory>
#include <string>

#include "comm/communicator.h"
#include "comm/staged_comm.h"
#include "core/device_memory.h"
#include "core/status.h"

namespace tera {

enum class DeviceCommKind { host, mapped, local, nccl, rccl, mpi, staged };

struct DeviceCommOptions {
  std::string choice = "auto";  // train.device_comm: auto, nccl, rccl, mpi or staged
  double timeout_s = 600;       // train.comm_timeout_s
};

// The kind every group of more than one rank gets, or why none can be made
// (naming the backend, what is missing and the choices this build has).
Expected<DeviceCommKind> choose_device_comm(const DeviceAddressing& addressing, const DeviceCommOptions& options,
                                            const std::string& backend);
// In words, for the start-up line: "collectives staged through host memory over MPI".
std::string device_comm_description(DeviceCommKind kind);
// The device memory its buffers take per communicator (an estimate: NCCL's
// channels' buffers); 0 for the kinds that take none.
int64_t device_comm_reserved_bytes(DeviceCommKind kind);

// What a rank's device communicators share: the staged communicators'
// progress and pinned buffers (made on first use).
struct DeviceCommContext {
  DeviceAddressing addressing;
  DeviceCommKind kind = DeviceCommKind::host;
  DeviceCommOptions options;
  std::shared_ptr<StagedProgress> staged;
};

// A new device communicator over `host` (which must outlive it), or nullptr
// when the host communicator carries device tensors itself. Collective over
// host (the staged and library communicators set up their own channels).
Expected<std::unique_ptr<Communicator>> make_device_communicator(Communicator& host, DeviceCommContext& context);

// Whether this binary has the vendor's collectives library ("cuda": NCCL;
// "hip": RCCL).
bool vendor_collectives_built(const std::string& vendor);

// Whether the MPI library takes device pointers of this vendor ("cuda",
// "hip"): Open MPI's MPIX query where its extension header says it was built
// so, Cray MPICH with MPICH_GPU_SUPPORT_ENABLED=1. False without MPI.
bool mpi_takes_device_pointers(const std::string& vendor);

}  // namespace tera
