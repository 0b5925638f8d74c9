// One arena per class, allocated in class order.
#include "model/rank_memory.h"

namespace tera {

RankMemory::RankMemory(const Backend& be, const MemoryPlan& plan) : be_(be) {
  for (MemoryClass c : kAllMemoryClasses) arenas_[static_cast<size_t>(c)] = DeviceArena(be, plan.arena(c));
}

MemoryReport RankMemory::report() const {
  return report_by_class([&](MemoryClass c) { return bytes(c); });
}

int64_t RankMemory::total() const { return report().total(); }

}  // namespace tera
