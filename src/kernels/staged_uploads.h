// Host-to-device copies that return at once, for an asynchronous device
// (cuda, gpu-emu: ops.h's copy promises that the source may be reused when
// it returns, without making the host wait for the stream). The source is
// copied into a pinned buffer of a small ring and the device copy queued on
// the compute stream from there; a buffer is reused once the event recorded
// after its copy is done, so a run of small uploads (tokens and targets per
// micro-batch) never synchronizes the stream. A copy larger than a buffer is
// left to the caller (upload returns false), which copies synchronously.
#pragma once

#include <cstdint>
#include <cstring>
#include <vector>

#include "core/device_memory.h"

namespace tera {

class StagedUploads {
 public:
  explicit StagedUploads(DeviceQueue& q, int64_t buffer_bytes = int64_t{4} << 20, int buffers = 4)
      : q_(q), bytes_(buffer_bytes), max_(buffers) {
    ring_.reserve(static_cast<size_t>(buffers));
  }
  ~StagedUploads() {
    for (Buffer& b : ring_) {
      q_.event_wait(b.done);
      q_.event_destroy(b.done);
      q_.pinned_free(b.host);
    }
  }
  StagedUploads(const StagedUploads&) = delete;
  StagedUploads& operator=(const StagedUploads&) = delete;

  // Queues dst[0, bytes) = src[0, bytes) on the compute stream; false (and
  // nothing done) when bytes exceeds a buffer or no pinned memory is left.
  bool upload(void* dst, const void* src, int64_t bytes) {
    if (bytes > bytes_) return false;
    Buffer* b = free_buffer();
    if (b == nullptr) return false;
    std::memcpy(b->host, src, static_cast<size_t>(bytes));
    q_.copy_async(dst, b->host, bytes, CopyKind::host_to_device, DeviceStream::compute);
    q_.event_record(b->done, DeviceStream::compute);
    return true;
  }

 private:
  struct Buffer {
    void* host = nullptr;
    DeviceQueue::Event done = nullptr;
  };
  // A buffer whose last copy has run: the next in turn, waited for when
  // every buffer of a full ring is still in use.
  Buffer* free_buffer() {
    for (size_t i = 0; i < ring_.size(); ++i) {
      Buffer& b = ring_[(next_ + i) % ring_.size()];
      if (q_.event_done(b.done)) {
        next_ = (next_ + i + 1) % ring_.size();
        return &b;
      }
    }
    if (static_cast<int>(ring_.size()) < max_) {
      Buffer b;
      b.host = q_.pinned_alloc(bytes_);
      if (b.host == nullptr) return nullptr;
      b.done = q_.event_create();
      ring_.push_back(b);
      return &ring_.back();
    }
    Buffer& b = ring_[next_];
    q_.event_wait(b.done);
    next_ = (next_ + 1) % ring_.size();
    return &b;
  }

  DeviceQueue& q_;
  int64_t bytes_;
  int max_;
  std::vector<Buffer> ring_;
  size_t next_ = 0;
};

}  // namespace tera
