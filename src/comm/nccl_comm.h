// The NCCL device communicator (nccl_comm.cpp), built where the CUDA toolkit
// has NCCL (TERA_HAVE_NCCL). Never run yet: no GPU has been at hand.
#pragma once

#include <memory>

#include "comm/communicator.h"
#include "core/device_memory.h"
#include "core/status.h"

namespace tera {

// A communicator over the same ranks as `host` (which must outlive it) that
// carries device buffers with NCCL: rank 0's ncclUniqueId is broadcast over
// host, every rank joins with ncclCommInitRank. Each operation waits on the
// backend's compute stream (an event recorded there), runs on this
// communicator's own stream (a point-to-point route's, for send/receive:
// open_routes), and completes its Request with an event there. A wait polls
// that event and NCCL's asynchronous error; past timeout_s, or on an error,
// the communicator is aborted and the job ends naming the group and peer.
Expected<std::unique_ptr<Communicator>> make_nccl_communicator(Communicator& host, DeviceQueue& queue,
                                                               double timeout_s);

}  // namespace tera
