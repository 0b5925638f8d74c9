// One allocation of device memory per buffer class, carved by an ArenaLayout
// (core/arena.h), through the backend that owns the memory. The arena hands
// out typed device pointers by buffer name; host code never dereferences
// them (DESIGN.md invariant 5): it passes them to the backend's ops, to the
// device communicator, or to an explicit copy.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "core/arena.h"
#include "core/check.h"
#include "kernels/backend.h"

namespace tera {

class DeviceArena {
 public:
  DeviceArena() = default;
  // Allocates layout.total_bytes() through be.alloc, zero-filled; throws
  // AllocationError naming the class (the layout's name) and the bytes.
  DeviceArena(const Backend& be, ArenaLayout layout);
  ~DeviceArena();
  DeviceArena(DeviceArena&& o) noexcept;
  DeviceArena& operator=(DeviceArena&& o) noexcept;
  DeviceArena(const DeviceArena&) = delete;
  DeviceArena& operator=(const DeviceArena&) = delete;

  // Copy k of buffer `name` as T (its dtype must be T's); nullptr when the
  // layout has no such buffer.
  template <typename T>
  T* get(std::string_view name, int64_t k = 0) const {
    const ArenaLayout::Entry* e = layout_.find(name);
    if (e == nullptr) return nullptr;
    return at<T>(*e, k);
  }
  template <typename T>
  T* at(const ArenaLayout::Entry& e, int64_t k = 0) const {
    TERA_ASSERT(e.dtype == dtype_of<T>(), "buffer " + e.name + " of the " + layout_.name() + " arena holds " +
                                              dtype_name(e.dtype) + ", read as " + dtype_name(dtype_of<T>()));
    TERA_ASSERT(k >= 0 && k < e.repeat, "buffer " + e.name + " has " + std::to_string(e.repeat) + " copies");
    if (e.count == 0) return nullptr;
    return reinterpret_cast<T*>(static_cast<char*>(base_) + e.offset + k * e.stride);
  }
  // Elements of one copy of `name` (0 when absent).
  int64_t count(std::string_view name) const {
    const ArenaLayout::Entry* e = layout_.find(name);
    return e == nullptr ? 0 : e->count;
  }
  int64_t bytes() const { return layout_.total_bytes(); }
  const ArenaLayout& layout() const { return layout_; }

 private:
  const Backend* be_ = nullptr;
  ArenaLayout layout_;
  void* base_ = nullptr;
};

}  // namespace tera
