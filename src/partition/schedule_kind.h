// The name of a pipeline schedule (pure data, below config/ and plan/): the
// run config and the planner's layouts carry it; partition/schedule.h builds
// the instruction lists for it.
#pragma once

#include <cstdint>
#include <string>

#include "core/status.h"

namespace tera {

// zb_h1: Qi et al. 2024 ("Zero Bubble Pipeline Parallelism", ZB-H1): 1F1B
// with each backward split into B (input gradient) and W (weight gradient).
// The planner prices it; the runtime does not run it yet (config refuses it).
enum class ScheduleKind { gpipe, one_f_one_b, interleaved, zb_h1 };
const char* schedule_kind_name(ScheduleKind k);  // "gpipe", "1f1b", "interleaved", "zb-h1"
Expected<ScheduleKind> parse_schedule_kind(const std::string& s);

// Whether the schedule's backward instruction is the input gradient only,
// followed later by a weight_grad instruction per micro-batch (zb-h1); the
// others run the whole backward (B and W fused) as one instruction.
inline bool splits_backward(ScheduleKind k) { return k == ScheduleKind::zb_h1; }

// Whether a schedule of `kind` exists for `stages` pipeline stages,
// `micro_batches` per step and `chunks` model chunks per stage (the
// interleaved schedule needs stages >= 2, chunks >= 2 and micro_batches a
// multiple of stages; the others, zb-h1 included, one chunk). make_schedule and check_layout
// both ask it.
Status check_schedule(ScheduleKind kind, int stages, int64_t micro_batches, int chunks);

}  // namespace tera
