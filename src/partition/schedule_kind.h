// The name of a pipeline schedule (pure data, below config/ and plan/): the
// run config and the planner's layouts carry it; partition/schedule.h builds
// the instruction lists for it.
#pragma once

#include <cstdint>
#include <string>

#include "core/status.h"

namespace tera {

enum class ScheduleKind { gpipe, one_f_one_b, interleaved };
const char* schedule_kind_name(ScheduleKind k);  // "gpipe", "1f1b", "interleaved"
Expected<ScheduleKind> parse_schedule_kind(const std::string& s);

// Whether a schedule of `kind` exists for `stages` pipeline stages,
// `micro_batches` per step and `chunks` model chunks per stage (the
// interleaved schedule needs stages >= 2, chunks >= 2 and micro_batches a
// multiple of stages; the others one chunk). make_schedule and check_layout
// both ask it.
Status check_schedule(ScheduleKind kind, int stages, int64_t micro_batches, int chunks);

}  // namespace tera
