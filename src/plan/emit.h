// A chosen layout written out for a trainer: as a tera run config (TOML with
// the [model], [train] and [parallel] keys of the runtime issues), or as
// Megatron-LM command-line arguments (flag names of Megatron-LM/Megatron-Core).
#pragma once

#include <string>

#include "plan/layout.h"

namespace tera {

std::string emit_tera_config(const ParallelLayout& l, const Workload& w);
std::string emit_megatron_args(const ParallelLayout& l, const Workload& w);

}  // namespace tera
