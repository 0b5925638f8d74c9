// The staged device communicator: collectives and point-to-point messages
// of tensors in device memory for any device backend, through pinned host
// memory and the host communicator (MPI). Each operation is ordered after
// the compute stream (an event it waits for on the backend's comm stream),
// copied down to pinned buffers, carried by MPI, and copied back up on the
// comm stream; the compute stream waits for that copy (a stream wait, not a
// host wait) when the caller waits for the request. All-reduces and
// broadcasts larger than a chunk go in chunks, so one chunk's copies
// overlap another's transfer; several operations (gradient buckets) are in
// flight at once, each advancing whenever the rank waits or tests anything
// of any staged communicator (StagedProgress: MPI is driven by its caller).
//
// Its MPI traffic runs on communicators split from the host one for it
// alone: its collectives start in its own issue order (a chunk's transfer
// starts once its copy is down and every earlier chunk's has started), the
// same on every rank, whatever the host communicator does meanwhile.
//
// Strict mode (an emulated device, or TERA_COMM_STRICT=1) enforces the rules
// NCCL has and MPI lacks, so CI sees what a GPU run would hit:
//   - the first send or receive on a route blocks the host until the peer
//     makes its first call on that route (NCCL connects lazily); open_routes
//     connects every route in the order given, the same on every rank;
//   - the collectives of one communicator are issued in one order on every
//     rank: each is checked (a signature all-reduced beside it), and a
//     mismatch ends the job naming the call.
// A wait that passes timeout_s ends the job naming the group, the peer and
// the operation (job_abort.h).
#pragma once

#include <cstdint>
#include <memory>

#include "comm/communicator.h"
#include "core/device_memory.h"

namespace tera {

struct StagedOptions {
  double timeout_s = 600;                  // train.comm_timeout_s
  bool strict = false;                     // NCCL's rules (above)
  int64_t chunk_bytes = int64_t{4} << 20;  // all-reduces and broadcasts go in chunks of this many bytes
};

// Progresses every staged operation of one rank and keeps the pinned
// buffers they stage through; shared by the rank's staged communicators.
class StagedProgress;
std::shared_ptr<StagedProgress> make_staged_progress(DeviceQueue& queue);

// A staged communicator over the same ranks as `host` (which, like the
// queue behind `progress`, must outlive it). Collective over host: it splits
// host for its own traffic.
std::unique_ptr<Communicator> make_staged_communicator(Communicator& host, std::shared_ptr<StagedProgress> progress,
                                                       const StagedOptions& options);

}  // namespace tera
