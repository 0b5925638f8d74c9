// Device arenas: one allocation through the backend, zero-filled once.
#include "kernels/device_arena.h"

#include <utility>

namespace tera {

DeviceArena::DeviceArena(const Backend& be, ArenaLayout layout) : be_(&be), layout_(std::move(layout)) {
  const int64_t bytes = layout_.total_bytes();
  if (bytes == 0) return;
  base_ = be.alloc(bytes);
  if (base_ == nullptr) {
    std::string what = layout_.name();
    if (what.empty()) what = layout_.entries().size() == 1 ? layout_.entries()[0].name : "buffers";
    throw AllocationError("cannot allocate " + std::to_string(bytes) + " bytes of " + be.name + " memory for the " +
                          what + " arena");
  }
  be.fill(base_, DType::u8, 0.0, bytes);
}

DeviceArena::~DeviceArena() {
  if (base_ != nullptr) be_->release(base_);
}

DeviceArena::DeviceArena(DeviceArena&& o) noexcept
    : be_(o.be_), layout_(std::move(o.layout_)), base_(std::exchange(o.base_, nullptr)) {}

DeviceArena& DeviceArena::operator=(DeviceArena&& o) noexcept {
  if (this != &o) {
    if (base_ != nullptr) be_->release(base_);
    be_ = o.be_;
    layout_ = std::move(o.layout_);
    base_ = std::exchange(o.base_, nullptr);
  }
  return *this;
}

}  // namespace tera
