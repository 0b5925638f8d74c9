// The staged device communicator's pinned staging (staged_pool.h): the pool
// of pinned host buffers, an operation's retirement (its events destroyed,
// its staging given back behind its last copy up), and the rank's shared
// StagedProgress. Freed buffers wait on their event, never the host: a
// buffer is handed out again only once the copy that last touched it ran.
#include "comm/staged_pool.h"

#include <algorithm>
#include <string>

#include "comm/staged_op.h"
#include "core/check.h"

namespace tera {

namespace staged {

PinnedPool::~PinnedPool() {
  for (Block& b : blocks_) {
    if (b.after != nullptr) {
      q_.event_wait(b.after);
      q_.event_destroy(b.after);
    }
    q_.pinned_free(b.p);
  }
}

uint8_t* PinnedPool::take(int64_t bytes) {
  bytes = std::max<int64_t>(bytes, 64);
  for (size_t i = 0; i < blocks_.size(); ++i) {
    Block& b = blocks_[i];
    if (b.bytes < bytes || b.bytes > 2 * bytes) continue;
    if (b.after != nullptr) {
      if (!q_.event_done(b.after)) continue;
      q_.event_destroy(b.after);
    }
    uint8_t* p = b.p;
    sizes_[p] = b.bytes;
    blocks_.erase(blocks_.begin() + static_cast<std::ptrdiff_t>(i));
    return p;
  }
  auto* p = static_cast<uint8_t*>(q_.pinned_alloc(bytes));
  TERA_ASSERT(p != nullptr, "staged device communicator: no pinned host memory left for " + std::to_string(bytes) +
                                " bytes of staging");
  sizes_[p] = bytes;
  return p;
}

void PinnedPool::give_back(uint8_t* p, DeviceQueue::Event after) {
  const auto it = sizes_.find(p);
  TERA_ASSERT(it != sizes_.end(), "staged device communicator: a staging buffer it did not hand out");
  blocks_.push_back({p, it->second, after});
  sizes_.erase(it);
}

void retire(StagedProgress& progress, StagedOp& op) {
  DeviceQueue& q = progress.queue;
  DeviceQueue::Event last = nullptr;  // the up copies run in order on the comm stream: the last covers all
  for (Piece& p : op.pieces) {
    if (p.down != nullptr) q.event_destroy(p.down);
    if (p.up != nullptr) {
      if (last != nullptr) q.event_destroy(last);
      last = p.up;
    }
    p.down = p.up = nullptr;
  }
  if (op.stage != nullptr) progress.pool.give_back(op.stage, last);
  else if (last != nullptr) q.event_destroy(last);
  if (op.stage_out != nullptr) progress.pool.give_back(op.stage_out, nullptr);
}

}  // namespace staged

std::shared_ptr<StagedProgress> make_staged_progress(DeviceQueue& queue) { return std::make_shared<StagedProgress>(queue); }

}  // namespace tera
