// One arena per class, allocated in class order.
#include "model/rank_memory.h"

#include <fmt/format.h>

#include "core/format.h"

namespace tera {

RankMemory::RankMemory(const Backend& be, const MemoryPlan& plan) : be_(be) {
  for (MemoryClass c : kAllMemoryClasses) {
    try {
      arenas_[static_cast<size_t>(c)] = DeviceArena(be, plan.arena(c));
    } catch (const AllocationError&) {
      // Out of memory after the check before allocation passed (memory taken
      // meanwhile, or none reported): name the class, the bytes asked and
      // what the plan, which `tera plan` prices byte for byte, predicted.
      std::string classes;
      int64_t total = 0, before = 0;
      bool allocated = true;  // the classes before c, in allocation order
      for (MemoryClass k : kAllMemoryClasses) {
        const int64_t b = plan.arena(k).total_bytes();
        total += b;
        if (k == c) allocated = false;
        if (allocated) before += b;
        if (b > 0) classes += fmt::format("{}{} {}", classes.empty() ? "" : ", ", memory_class_name(k), human_bytes(b));
      }
      const int64_t asked = plan.arena(c).total_bytes();
      throw AllocationError(fmt::format(
          "{} memory ran out allocating the {} buffers: {} ({} bytes) asked, after {} of the other classes; "
          "the memory plan of this rank, which `tera plan` predicts byte for byte, is {} ({})",
          be.name, memory_class_name(c), human_bytes(asked), asked, human_bytes(before), human_bytes(total), classes));
    }
  }
}

MemoryReport RankMemory::report() const {
  return report_by_class([&](MemoryClass c) { return bytes(c); });
}

int64_t RankMemory::total() const { return report().total(); }

}  // namespace tera
