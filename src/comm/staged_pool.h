// The staged device communicator's staging (internal to comm/; staged_pool.cpp
// and staged_comm.cpp): the pinned host buffers its operations go through
// (PinnedPool) and one rank's shared state (StagedProgress, staged_comm.h:
// the pool and the rank's staged communicators). A buffer given back is
// handed out again only once the device copy that last touched it has run.
#pragma once

#include <cstdint>
#include <map>
#include <vector>

#include "comm/staged_comm.h"
#include "core/device_memory.h"

namespace tera {

namespace staged {

class StagedComm;
struct StagedOp;

// Pinned host buffers, reused once the device copy that last touched them
// has run.
class PinnedPool {
 public:
  explicit PinnedPool(DeviceQueue& q) : q_(q) {}
  ~PinnedPool();
  // A buffer of at least `bytes`: a free one of at most twice that, else a new one.
  uint8_t* take(int64_t bytes);
  // p is reusable once `after` (owned from now on; may be null) is done.
  void give_back(uint8_t* p, DeviceQueue::Event after);

 private:
  struct Block {
    uint8_t* p;
    int64_t bytes;
    DeviceQueue::Event after;
  };
  DeviceQueue& q_;
  std::vector<Block> blocks_;          // free, or free once `after` is done
  std::map<uint8_t*, int64_t> sizes_;  // handed out
};

}  // namespace staged

class StagedProgress {
 public:
  explicit StagedProgress(DeviceQueue& q) : queue(q), pool(q) {}
  void progress();  // staged_comm.cpp
  DeviceQueue& queue;
  staged::PinnedPool pool;
  std::vector<staged::StagedComm*> comms;  // registered by each staged communicator for its lifetime
};

namespace staged {

// Gives an operation's events and staging back (its last copy up may still
// be queued: the staging is reused once that has run).
void retire(StagedProgress& progress, StagedOp& op);

}  // namespace staged

}  // namespace tera
