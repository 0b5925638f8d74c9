// Arena layouts: typed entries, 64-byte aligned, repeated copies back to back.
#include "core/arena.h"

#include "core/check.h"

namespace tera {

int64_t ArenaLayout::aligned_bytes(DType dtype, int64_t count) {
  return round_up(count * dtype_bytes(dtype), kAlignBytes);
}

ArenaLayout::Entry ArenaLayout::add(std::string name, DType dtype, int64_t count, int64_t repeat) {
  TERA_ASSERT(count >= 0 && repeat >= 0, name);
  TERA_ASSERT(find(name) == nullptr, "the " + name_ + " arena lists " + name + " twice");
  const int64_t stride = aligned_bytes(dtype, count);
  entries_.push_back({std::move(name), dtype, count, repeat, total_, stride});
  total_ += repeat * stride;
  return entries_.back();
}

const ArenaLayout::Entry* ArenaLayout::find(std::string_view name) const {
  for (const Entry& e : entries_) {
    if (e.name == name) return &e;
  }
  return nullptr;
}

}  // namespace tera
