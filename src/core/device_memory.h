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
//   device       memory of an accelerator (cuda, gpu-emu): host code and MPI
//                never receive its pointers, except an MPI that says it
//                takes them (GPU-aware MPI). The backend's DeviceQueue
//                (below) is what a device communicator orders itself by
//                and stages through.
#pragma once

#include <cstdint>

namespace tera {

// Which side each pointer of a copy is on.
enum class CopyKind { host_to_device, device_to_host, device_to_device };

// The streams of a device-addressed backend: compute (every op, in issue
// order) and comm (what a device communicator queues: its copies, its
// library's collectives). Work on one stream runs in the order issued; two
// streams are ordered only by events.
enum class DeviceStream { compute, comm };

// What a device communicator needs of a device-addressed backend: events
// with CUDA's semantics, asynchronous copies on either stream, and host
// memory the device copies from and to without staging (pinned).
//
// An event records the work issued on a stream so far; it is done once that
// work has run. stream_wait makes later work on a stream start after an
// event; event_wait blocks the host. Every call is made from one host
// thread (the rank's).
class DeviceQueue {
 public:
  virtual ~DeviceQueue() = default;
  // "cuda", "hip" or "" (no vendor library's collectives apply: gpu-emu).
  virtual const char* vendor() const = 0;
  // The runtime's own stream handle (cudaStream_t) for a vendor library;
  // null where there is none.
  virtual void* native_stream(DeviceStream s) = 0;
  // True for an emulated device: its device communicators enforce the rules
  // NCCL has and MPI lacks (comm/staged_comm.h), so CI sees what a GPU would.
  virtual bool emulated() const { return false; }

  using Event = void*;
  virtual Event event_create() = 0;
  virtual void event_destroy(Event e) = 0;
  virtual void event_record(Event e, DeviceStream s) = 0;
  virtual void stream_wait(DeviceStream s, Event e) = 0;
  virtual bool event_done(Event e) = 0;  // never blocks
  virtual void event_wait(Event e) = 0;  // the host blocks until done
  // Queued on stream s; host memory must be pinned_alloc's (it is read or
  // written when the stream gets there, not when the call returns).
  virtual void copy_async(void* dst, const void* src, int64_t bytes, CopyKind kind, DeviceStream s) = 0;
  virtual void* pinned_alloc(int64_t bytes) = 0;  // null when none is left
  virtual void pinned_free(void* p) = 0;
};

struct DeviceAddressing {
  enum class Kind { host, mapped_host, device };
  Kind kind = Kind::host;
  // mapped_host only: the host address of a device pointer (null stays null).
  void* (*to_host)(const void* device_ptr) = nullptr;
  // device only: the backend's streams and events (owned by the backend).
  DeviceQueue* queue = nullptr;
};

}  // namespace tera
