// How a backend's device memory can be reached from the host side, which is
// what decides the device communicator of each process group (DESIGN.md
// invariants 5 and 6). A backend states it (kernels/backend.h); comm/ reads
// it (comm/device_comm.h) without knowing the backend:
//
//   host         device memory is plain host memory (the cpu backend): the
//                host communicator (MPI, the in-process world) carries
//                device tensors as they are;
//   mapped_host  host memory that host code reaches only through to_host
//                (the cpu-guarded backend, whose device pointers fault when
//                dereferenced): the device communicator is the host one
//                with every buffer pointer passed through to_host;
//   device       memory of an accelerator (cuda, hip): only a device
//                communicator (NCCL/RCCL) may take its pointers; no MPI
//                call ever receives one.
#pragma once

namespace tera {

struct DeviceAddressing {
  enum class Kind { host, mapped_host, device };
  Kind kind = Kind::host;
  // mapped_host only: the host address of a device pointer (null stays null).
  void* (*to_host)(const void* device_ptr) = nullptr;
  // device only: the stream the backend queues its ops on (a cudaStream_t),
  // after which the device communicator orders its collectives.
  void* (*compute_stream)() = nullptr;
};

}  // namespace tera
