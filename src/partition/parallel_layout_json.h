// A ParallelLayout as a JSON object: the one spelling of a layout in files
// (checkpoint meta.json, `tera plan --json`, `plan validate --json`).
//
// layout_to_json writes every field under its long name:
//   {"tp", "pp", "dp", "cp", "vpp", "micro_batch", "zero", "sequence_parallel",
//    "recompute", "schedule", "stage_layers"}
// layout_from_json reads what any tera ever wrote: every key is optional and
// keeps ParallelLayout's default when absent (the first checkpoints had no
// micro_batch, cp or recompute, and `ckpt reshard`'s first layouts only tp,
// pp, dp, zero and vpp); an absent schedule follows vpp, as in layout
// strings; dp = 0 (not known) is kept. Keys it does not know
// ("resharded_from", keys of later versions) are ignored. A present key
// with a wrong type or value is refused, naming `where` and the key.
#pragma once

#include <nlohmann/json_fwd.hpp>
#include <string>

#include "partition/parallel_layout.h"
#include "core/status.h"

namespace tera {

nlohmann::json layout_to_json(const ParallelLayout& l);
Expected<ParallelLayout> layout_from_json(const nlohmann::json& j, const std::string& where);

}  // namespace tera
