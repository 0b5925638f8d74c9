// A chosen layout written out for a trainer: as a tera run config (TOML with
// the [model], [train] and [parallel] keys `tera train` reads; what it
// allocates is what the plan priced), or as Megatron-LM command-line
// arguments (flag names of Megatron-LM/Megatron-Core, the model's RoPE,
// RMSNorm, bias and tying settings included).
#pragma once

#include <string>

#include "core/status.h"
#include "plan/hardware.h"
#include "plan/layout.h"

namespace tera {

// The run config `tera train` allocates and runs as the plan priced it on
// `cl` (its stack's attention and GEMM inputs); an error naming what the
// runtime lacks for a layout it cannot run (cp > 1, selective recompute, fp8).
Expected<std::string> emit_tera_config(const ParallelLayout& l, const Workload& w, const Cluster& cl);
std::string emit_megatron_args(const ParallelLayout& l, const Workload& w, const Cluster& cl);

}  // namespace tera
