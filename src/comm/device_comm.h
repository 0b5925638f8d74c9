// The device communicator of a process group (DESIGN.md invariant 6): the
// one that carries tensors in the backend's device memory, beside the host
// communicator that carries host scalars, checkpoint gathers and bootstrap.
// Which it is follows from how the backend's memory is reached
// (core/device_memory.h):
//   host         the host communicator itself (nothing to make);
//   mapped_host  a communicator over the host one that passes every buffer
//                pointer through the backend's to_host (the cpu-guarded
//                backend), so MPI moves the real memory and host code still
//                never dereferences a device pointer;
//   device       NCCL (nccl_comm.h) where the build found it beside the
//                CUDA toolkit; without it refused with a message, so no MPI
//                call ever receives a device pointer. RCCL (same API) is not
//                built: Debian 12 has none.
#pragma once

#include <memory>
#include <string>

#include "comm/communicator.h"
#include "core/device_memory.h"
#include "core/status.h"

namespace tera {

// A new device communicator over `host` (which must outlive it), or nullptr
// when the host communicator carries device tensors itself.
Expected<std::unique_ptr<Communicator>> make_device_communicator(Communicator& host, const DeviceAddressing& addressing);

}  // namespace tera
