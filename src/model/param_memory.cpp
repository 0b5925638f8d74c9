// Resident parameter memory for one process.
#include "model/param_memory.h"

#include "core/check.h"

namespace tera {

LocalParamMemory::LocalParamMemory(const ParamTable& table, const Backend& be, RankMemory& memory)
    : table_(table),
      be_(be),
      params_(memory.arena(MemoryClass::parameters).get<float>("params")),
      grads_(memory.arena(MemoryClass::gradients).get<float>("grads")),
      compute_(memory.arena(MemoryClass::parameters).get<uint16_t>("compute_weights")) {
  TERA_ASSERT(memory.arena(MemoryClass::parameters).count("params") == table.total_floats() &&
                  memory.arena(MemoryClass::gradients).count("grads") == table.total_floats(),
              "the memory plan was made for another parameter table");
}

void LocalParamMemory::refresh_compute_weights() {
  if (compute_ != nullptr) be_.cast(compute_, DType::bf16, params_, DType::f32, table_.total_floats());
}

void LocalParamMemory::zero_grads() { be_.fill(grads_, DType::f32, 0.0, table_.total_floats()); }

}  // namespace tera
