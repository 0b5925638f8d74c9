// Arena allocation: aligned, zero-filled once, never resized.
#include "core/arena.h"

#include <cstdlib>
#include <cstring>

#include "core/check.h"
#include "core/tensor.h"

namespace tera {

int64_t ArenaLayout::add(std::string name, int64_t count) {
  TERA_ASSERT(count >= 0, name);
  const int64_t offset = total_;
  entries_.push_back({std::move(name), offset, count});
  total_ += round_up(count, kAlignFloats);
  return offset;
}

void Arena::Free::operator()(float* p) const { std::free(p); }

Arena::Arena(const ArenaLayout& layout) : bytes_(layout.total_bytes()) {
  if (bytes_ == 0) return;
  void* p = std::aligned_alloc(64, static_cast<size_t>(bytes_));
  if (p == nullptr) {
    std::string what = layout.name();
    if (what.empty()) what = layout.entries().size() == 1 ? layout.entries()[0].name : "buffers";
    throw AllocationError("cannot allocate " + std::to_string(bytes_) + " bytes of host memory for the " + what +
                          " arena");
  }
  std::memset(p, 0, static_cast<size_t>(bytes_));
  base_.reset(static_cast<float*>(p));
}

}  // namespace tera
