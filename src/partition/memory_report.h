// The buffer classes of a rank's memory and the bytes it holds in each: what
// the memory plan lists (partition/memory_plan.h), what the runtime allocated
// (model/rank_memory.h) and what `tera train` and the planner print. Kept
// apart so that reporting memory does not pull in the model.
#pragma once

#include <array>
#include <cstdint>

namespace tera {

enum class MemoryClass { parameters, gradients, optimizer, zero_staging, comm_buckets, zero_gather, activations, workspace };
constexpr int kMemoryClasses = 8;
constexpr std::array<MemoryClass, kMemoryClasses> kAllMemoryClasses = {
    MemoryClass::parameters,   MemoryClass::gradients,   MemoryClass::optimizer,   MemoryClass::zero_staging,
    MemoryClass::comm_buckets, MemoryClass::zero_gather, MemoryClass::activations, MemoryClass::workspace};
// "parameters", "gradients", "optimizer state", "ZeRO staging",
// "communication buckets", "ZeRO gather", "activations", "workspace".
const char* memory_class_name(MemoryClass c);

struct MemoryReport {
  std::array<int64_t, kMemoryClasses> bytes{};
  int64_t operator[](MemoryClass c) const { return bytes[static_cast<size_t>(c)]; }
  int64_t& operator[](MemoryClass c) { return bytes[static_cast<size_t>(c)]; }
  int64_t total() const {
    int64_t t = 0;
    for (int64_t b : bytes) t += b;
    return t;
  }
};

// The report of bytes_of(class) for every class.
template <typename F>
MemoryReport report_by_class(F&& bytes_of) {
  MemoryReport r;
  for (MemoryClass c : kAllMemoryClasses) r[c] = bytes_of(c);
  return r;
}

}  // namespace tera
