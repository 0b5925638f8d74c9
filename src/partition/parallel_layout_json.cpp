// Layouts in JSON; see parallel_layout_json.h.
#include "partition/parallel_layout_json.h"

#include <algorithm>
#include <fmt/format.h>
#include <nlohmann/json.hpp>

namespace tera {

nlohmann::json layout_to_json(const ParallelLayout& l) {
  nlohmann::json j = {{"tp", l.tp},
          {"pp", l.pp},
          {"dp", l.dp},
          {"cp", l.cp},
          {"vpp", l.vpp},
          {"micro_batch", l.micro_batch},
          {"zero", l.zero},
          {"sequence_parallel", l.sequence_parallel},
          {"recompute", recompute_name(l.recompute)},
          {"schedule", schedule_kind_name(l.schedule)},
          {"stage_layers", l.stage_layers}};
  if (!l.reshard_after_forward) j["reshard_after_forward"] = false;  // written only when off: older files stay as they were
  if (l.hybrid_shard()) j["shard"] = l.shard;                         // written only when hybrid, likewise
  return j;
}

namespace {

// A field of the layout object at `where`: its name and the fix in every refusal.
struct Fields {
  const nlohmann::json& j;
  const std::string& where;

  Status refuse(const char* key, const std::string& what) const {
    return Status::error(fmt::format("{}: layout key '{}' = {} {}", where, key, j.at(key).dump(), what));
  }
  // An integer in [lo, hi]; absent: *out unchanged.
  Status integer(const char* key, int lo, int hi, int* out) const {
    if (!j.contains(key)) return ok_status();
    const nlohmann::json& v = j.at(key);
    if (!v.is_number_integer() || v.get<int64_t>() < lo || v.get<int64_t>() > hi) {
      return refuse(key, fmt::format("must be an integer in [{}, {}]", lo, hi));
    }
    *out = static_cast<int>(v.get<int64_t>());
    return ok_status();
  }
};

constexpr int kMaxDegree = 1 << 30;  // the planner's limit on GPUs (plan/scaling.h)

}  // namespace

Expected<ParallelLayout> layout_from_json(const nlohmann::json& j, const std::string& where) {
  if (!j.is_object()) return Status::error(where + ": the layout must be a JSON object, got " + j.dump());
  const Fields f{j, where};
  ParallelLayout l;
  TERA_RETURN_IF_ERROR(f.integer("tp", 1, kMaxDegree, &l.tp));
  TERA_RETURN_IF_ERROR(f.integer("pp", 1, kMaxDegree, &l.pp));
  TERA_RETURN_IF_ERROR(f.integer("dp", 0, kMaxDegree, &l.dp));
  TERA_RETURN_IF_ERROR(f.integer("cp", 1, kMaxDegree, &l.cp));
  TERA_RETURN_IF_ERROR(f.integer("vpp", 1, kMaxDegree, &l.vpp));
  TERA_RETURN_IF_ERROR(f.integer("micro_batch", 1, kMaxDegree, &l.micro_batch));
  TERA_RETURN_IF_ERROR(f.integer("zero", 0, 3, &l.zero));
  TERA_RETURN_IF_ERROR(f.integer("shard", 0, kMaxDegree, &l.shard));
  if (j.contains("sequence_parallel")) {
    if (!j["sequence_parallel"].is_boolean()) return f.refuse("sequence_parallel", "must be true or false");
    l.sequence_parallel = j["sequence_parallel"].get<bool>();
  }
  if (j.contains("reshard_after_forward")) {
    if (!j["reshard_after_forward"].is_boolean()) return f.refuse("reshard_after_forward", "must be true or false");
    l.reshard_after_forward = j["reshard_after_forward"].get<bool>();
  }
  if (j.contains("recompute")) {
    auto r = j["recompute"].is_string() ? parse_recompute(j["recompute"].get<std::string>())
                                        : Expected<Recompute>(Status::error("not a string"));
    if (!r) return f.refuse("recompute", "must be \"none\", \"selective\" or \"full\"");
    l.recompute = *r;
  }
  l.schedule = l.vpp > 1 ? ScheduleKind::interleaved : ScheduleKind::one_f_one_b;
  if (j.contains("schedule")) {
    auto k = j["schedule"].is_string() ? parse_schedule_kind(j["schedule"].get<std::string>())
                                       : Expected<ScheduleKind>(Status::error("not a string"));
    if (!k) return f.refuse("schedule", "must be \"gpipe\", \"1f1b\", \"interleaved\" or \"zb-h1\"");
    l.schedule = *k;
  }
  if (j.contains("stage_layers")) {
    const nlohmann::json& s = j["stage_layers"];
    const bool counts = s.is_array() && std::all_of(s.begin(), s.end(), [](const nlohmann::json& n) {
                          return n.is_number_integer() && n.get<int64_t>() >= 0 && n.get<int64_t>() <= kMaxDegree;
                        });
    if (!counts) return f.refuse("stage_layers", "must be a list of layer counts, one per virtual stage (or [])");
    for (const nlohmann::json& n : s) l.stage_layers.push_back(n.get<int64_t>());
  }
  return l;
}

}  // namespace tera
