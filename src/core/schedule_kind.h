// The name of a pipeline schedule (pure data, below config/ and plan/): the
// run config and the planner's layouts carry it; parallel/schedule.h builds
// the instruction lists for it.
#pragma once

#include <string>

#include "core/status.h"

namespace tera {

enum class ScheduleKind { gpipe, one_f_one_b, interleaved };
const char* schedule_kind_name(ScheduleKind k);  // "gpipe", "1f1b", "interleaved"
Expected<ScheduleKind> parse_schedule_kind(const std::string& s);

}  // namespace tera
