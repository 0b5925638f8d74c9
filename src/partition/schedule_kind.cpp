#include "partition/schedule_kind.h"

#include <fmt/format.h>

namespace tera {

const char* schedule_kind_name(ScheduleKind k) {
  switch (k) {
    case ScheduleKind::gpipe: return "gpipe";
    case ScheduleKind::one_f_one_b: return "1f1b";
    case ScheduleKind::interleaved: return "interleaved";
    case ScheduleKind::zb_h1: return "zb-h1";
  }
  return "?";
}

Expected<ScheduleKind> parse_schedule_kind(const std::string& s) {
  if (s == "gpipe") return ScheduleKind::gpipe;
  if (s == "1f1b") return ScheduleKind::one_f_one_b;
  if (s == "interleaved") return ScheduleKind::interleaved;
  if (s == "zb-h1") return ScheduleKind::zb_h1;
  return Status::error("unknown pipeline schedule '" + s + "'; choose gpipe, 1f1b, interleaved or zb-h1");
}

Status check_schedule(ScheduleKind kind, int stages, int64_t M, int chunks) {
  const char* name = schedule_kind_name(kind);
  if (stages < 1) return Status::error(fmt::format("pipeline stages = {} must be >= 1", stages));
  if (M < 1) return Status::error(fmt::format("micro-batches = {} must be >= 1", M));
  if (chunks < 1) return Status::error(fmt::format("virtual chunks = {} must be >= 1", chunks));
  if (kind == ScheduleKind::zb_h1 && chunks != 1) {
    return Status::error(fmt::format("the zb-h1 schedule has one model chunk per stage, got chunks = {} (vpp); the "
                                     "zero-bubble schedules with virtual chunks (ZB-V, interleaved ZB) are not built: "
                                     "use vpp = 1 with zb-h1, or the interleaved schedule",
                                     chunks));
  }
  if (kind != ScheduleKind::interleaved && chunks != 1) {
    return Status::error(fmt::format("the {} schedule has one model chunk per stage, got chunks = {}; "
                                     "use the interleaved schedule for virtual chunks",
                                     name, chunks));
  }
  if (kind == ScheduleKind::interleaved) {
    if (stages < 2) return Status::error("the interleaved schedule needs stages >= 2 (got 1); use 1f1b");
    if (chunks < 2) {
      return Status::error(fmt::format("the interleaved schedule needs chunks >= 2 (got {}); use 1f1b", chunks));
    }
    if (M % stages != 0) {
      return Status::error(fmt::format("the interleaved schedule needs micro_batches % stages == 0, got "
                                       "micro_batches = {}, stages = {}; choose a multiple of {}",
                                       M, stages, stages));
    }
  }
  return ok_status();
}

}  // namespace tera
