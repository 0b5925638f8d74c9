#include "core/schedule_kind.h"

namespace tera {

const char* schedule_kind_name(ScheduleKind k) {
  switch (k) {
    case ScheduleKind::gpipe: return "gpipe";
    case ScheduleKind::one_f_one_b: return "1f1b";
    case ScheduleKind::interleaved: return "interleaved";
  }
  return "?";
}

Expected<ScheduleKind> parse_schedule_kind(const std::string& s) {
  if (s == "gpipe") return ScheduleKind::gpipe;
  if (s == "1f1b") return ScheduleKind::one_f_one_b;
  if (s == "interleaved") return ScheduleKind::interleaved;
  return Status::error("unknown pipeline schedule '" + s + "'; choose gpipe, 1f1b or interleaved");
}

}  // namespace tera
