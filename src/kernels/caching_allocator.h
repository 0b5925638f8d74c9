// A caching allocator over a device's raw allocate and free (cudaMalloc and
// cudaFree on cuda; the emulated device's on gpu-emu), behind the backends'
// alloc/release and so behind the arenas. A released block is kept and
// handed to a later request it fits, so work that allocates and releases
// the same sizes again and again (evaluation and generation buffers,
// checkpoint resharding, tests) pays the raw calls once; cudaFree also waits
// for the whole device, which a cached release does not.
//
// Sizes round up to a class: 512 bytes below 1 MiB, 2 MiB above. A request
// takes the smallest cached block of its class or larger, up to twice its
// class (a small request never pins a large block). When the raw allocator
// fails, every cached block is freed and the request tried once more, so the
// cache never makes an allocation fail that would succeed without it.
//
// Ordering: a reused block may still be read by work queued before its
// release. The backends queue every kernel and copy on one compute stream,
// so the new owner's work runs after the old owner's; buffers a
// communicator's stream reads are arena memory, released only after their
// requests have completed.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <mutex>
#include <unordered_map>
#include <utility>

namespace tera {

class CachingAllocator {
 public:
  using RawAlloc = std::function<void*(int64_t bytes)>;  // null when out of memory
  using RawFree = std::function<void(void* p)>;

  struct Stats {
    int64_t in_use = 0;      // bytes of the blocks handed out (their classes)
    int64_t cached = 0;      // bytes of the blocks kept for reuse
    int64_t raw_allocs = 0;  // calls of the raw allocator that succeeded
    int64_t reuses = 0;      // requests served from the cache
  };

  CachingAllocator(RawAlloc raw_alloc, RawFree raw_free) : raw_alloc_(std::move(raw_alloc)), raw_free_(std::move(raw_free)) {}
  CachingAllocator(const CachingAllocator&) = delete;
  CachingAllocator& operator=(const CachingAllocator&) = delete;
  ~CachingAllocator() { trim(); }  // blocks still handed out stay with their owners

  static int64_t size_class(int64_t bytes) {
    constexpr int64_t kSmall = 512, kLarge = int64_t{2} << 20, kSmallLimit = int64_t{1} << 20;
    const int64_t unit = bytes < kSmallLimit ? kSmall : kLarge;
    return (bytes + unit - 1) / unit * unit;
  }

  // A block of at least `bytes` (> 0), or null when the device has no room.
  void* allocate(int64_t bytes) {
    if (bytes <= 0) return nullptr;
    const int64_t want = size_class(bytes);
    std::lock_guard<std::mutex> lock(mu_);
    if (auto it = free_.lower_bound(want); it != free_.end() && it->first <= 2 * want) {
      void* p = it->second;
      live_[p] = it->first;
      stats_.cached -= it->first;
      stats_.in_use += it->first;
      ++stats_.reuses;
      free_.erase(it);
      return p;
    }
    void* p = raw_alloc_(want);
    if (p == nullptr && !free_.empty()) {
      trim_locked();
      p = raw_alloc_(want);
    }
    if (p == nullptr) return nullptr;
    live_[p] = want;
    stats_.in_use += want;
    ++stats_.raw_allocs;
    return p;
  }

  // Returns a block from allocate() to the cache; false (and nothing done)
  // for a pointer this allocator did not hand out.
  bool release(void* p) {
    if (p == nullptr) return true;
    std::lock_guard<std::mutex> lock(mu_);
    const auto it = live_.find(p);
    if (it == live_.end()) return false;
    free_.emplace(it->second, p);
    stats_.in_use -= it->second;
    stats_.cached += it->second;
    live_.erase(it);
    return true;
  }

  // Frees every cached block.
  void trim() {
    std::lock_guard<std::mutex> lock(mu_);
    trim_locked();
  }

  Stats stats() const {
    std::lock_guard<std::mutex> lock(mu_);
    return stats_;
  }

 private:
  void trim_locked() {
    for (auto& [bytes, p] : free_) raw_free_(p);
    free_.clear();
    stats_.cached = 0;
  }

  RawAlloc raw_alloc_;
  RawFree raw_free_;
  mutable std::mutex mu_;
  std::unordered_map<void*, int64_t> live_;  // handed out: block -> class bytes
  std::multimap<int64_t, void*> free_;       // cached: class bytes -> block
  Stats stats_;
};

}  // namespace tera
