// Bytes one rank holds, by buffer class: what Gpt::memory() reports for the
// model's own arenas, what ZeroMemory (parallel/zero.h) reports for the
// parameters and gradients it keeps, and what the Engine adds for the
// optimizer state it owns. Kept apart from gpt.h so that reporting memory
// does not pull in the model.
#pragma once

#include <cstdint>

namespace tera {

struct MemoryReport {
  int64_t params = 0, grads = 0, optimizer = 0, activations = 0, workspace = 0;
  int64_t total() const { return params + grads + optimizer + activations + workspace; }
};

}  // namespace tera
