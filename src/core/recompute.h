// Activation recomputation (Korthikanti et al. 2022), the one knob the
// model's activation tables (model/model_spec.h) and the parallel layout
// (partition/parallel_layout.h) share: selective drops the attention-score
// buffers (recomputed from q, k in backward), full keeps only each block's
// input and recomputes the block.
#pragma once

#include <string>

#include "core/status.h"

namespace tera {

enum class Recompute { none, selective, full };
const char* recompute_name(Recompute r);  // "none", "selective", "full"
Expected<Recompute> parse_recompute(const std::string& s);

}  // namespace tera
