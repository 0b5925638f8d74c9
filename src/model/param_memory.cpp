// Resident parameter memory for one process.
#include "model/param_memory.h"

#include <cstring>

namespace tera {

namespace {
ArenaLayout flat_layout(const ParamTable& t) {
  ArenaLayout l;
  l.add("params", t.total_floats());
  return l;
}
}  // namespace

LocalParamMemory::LocalParamMemory(const ParamTable& table)
    : table_(table), params_(flat_layout(table)), grads_(flat_layout(table)) {}

void LocalParamMemory::zero_grads() { std::memset(grads_.base(), 0, static_cast<size_t>(grads_.bytes())); }

}  // namespace tera
