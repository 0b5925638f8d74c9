// The device memory of one rank: one DeviceArena per memory class, allocated
// from the memory plan (partition/memory_plan.h) before step 1 and never resized.
// The parts of the runtime that use a class bind their buffers from it by
// name: ZeroMemory (parameters, gradients, ZeRO staging, buckets and gather
// buffers), the optimizer (optimizer state), the model (activations,
// workspace). What it holds per class is therefore exactly the plan.
#pragma once

#include <array>
#include <cstdint>

#include "kernels/device_arena.h"
#include "partition/memory_plan.h"

namespace tera {

class RankMemory {
 public:
  // Allocates every class of `plan` (the empty ones allocate nothing).
  RankMemory(const Backend& be, const MemoryPlan& plan);
  DeviceArena& arena(MemoryClass c) { return arenas_[static_cast<size_t>(c)]; }
  const DeviceArena& arena(MemoryClass c) const { return arenas_[static_cast<size_t>(c)]; }
  int64_t bytes(MemoryClass c) const { return arena(c).bytes(); }
  int64_t total() const;
  MemoryReport report() const;
  const Backend& backend() const { return be_; }

 private:
  const Backend& be_;
  std::array<DeviceArena, kMemoryClasses> arenas_;
};

}  // namespace tera
