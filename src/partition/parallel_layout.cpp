// Rank arithmetic and layout strings; see parallel_layout.h.
#include "partition/parallel_layout.h"

#include <fmt/format.h>
#include <map>

#include "core/strings.h"

namespace tera {

std::vector<int> ParallelLayout::tp_group(int rank) const {
  const Coord c = coord(rank);
  std::vector<int> g;
  for (int t = 0; t < tp; ++t) g.push_back(rank_of({t, c.pp, c.dp, c.cp}));
  return g;
}

std::vector<int> ParallelLayout::dp_group(int rank) const {
  const Coord c = coord(rank);
  std::vector<int> g;
  for (int d = 0; d < dp; ++d) g.push_back(rank_of({c.tp, c.pp, d, c.cp}));
  return g;
}

std::vector<int> ParallelLayout::pp_group(int rank) const {
  const Coord c = coord(rank);
  std::vector<int> g;
  for (int p = 0; p < pp; ++p) g.push_back(rank_of({c.tp, p, c.dp, c.cp}));
  return g;
}

std::vector<int> ParallelLayout::embedding_group(int rank) const {
  const Coord c = coord(rank);
  if (pp == 1 || (c.pp != 0 && c.pp != pp - 1)) return {};
  return {rank_of({c.tp, 0, c.dp, c.cp}), rank_of({c.tp, pp - 1, c.dp, c.cp})};
}

std::string ParallelLayout::to_string() const {
  return cp > 1 ? fmt::format("tp={} cp={} pp={} dp={}", tp, cp, pp, dp) : fmt::format("tp={} pp={} dp={}", tp, pp, dp);
}

ParallelLayout with_world_size(ParallelLayout l, int world) {
  const int fixed = l.tp * l.cp * l.pp;
  if (l.dp == 0 && fixed > 0) l.dp = world / fixed;
  return l;
}

std::string layout_string(const ParallelLayout& l) {
  std::string stages;
  if (!l.stage_layers.empty()) {
    stages = ",stage_layers=";
    for (size_t v = 0; v < l.stage_layers.size(); ++v) {
      if (v > 0) stages += '/';
      stages += std::to_string(l.stage_layers[v]);
    }
  }
  return fmt::format("tp={},pp={},dp={},{}vpp={},mb={},zero={},{}{}sp={},recompute={},schedule={}{}", l.tp, l.pp, l.dp,
                     l.cp > 1 ? fmt::format("cp={},", l.cp) : "", l.vpp, l.micro_batch, l.zero,
                     l.hybrid_shard() ? fmt::format("shard={},", l.shard) : "",
                     l.reshard_after_forward ? "" : "reshard=0,", l.sequence_parallel ? 1 : 0,
                     recompute_name(l.recompute), schedule_kind_name(l.schedule), stages);
}

namespace {

Expected<int64_t> parse_count(const std::string& key, const std::string& s) {
  int64_t v = 0;
  if (!parse_int64(s, v) || v < 0 || v > (int64_t{1} << 30)) {
    return Status::error("layout key " + key + "=" + s + " must be a non-negative integer (at most 2^30)");
  }
  return v;
}

}  // namespace

Expected<ParallelLayout> parse_layout(const std::string& text, int gpus) {
  ParallelLayout l;
  std::map<std::string, std::string> kv;
  for (const std::string& item : split(text, ',')) {
    if (item.empty()) continue;
    const size_t eq = item.find('=');
    if (eq == std::string::npos) {
      return Status::error("layout item '" + item + "' is not key=value; write e.g. tp=8,pp=4,dp=2,mb=1");
    }
    const std::string key = item.substr(0, eq);
    if (!kv.emplace(key, item.substr(eq + 1)).second) {
      return Status::error("layout key " + key + " is given twice in '" + text + "'; give each key once");
    }
  }
  auto integer = [&](const std::string& key, int* out) -> Status {
    auto it = kv.find(key);
    if (it == kv.end()) return ok_status();
    auto v = parse_count(key, it->second);
    if (!v) return v.status();
    *out = static_cast<int>(*v);
    kv.erase(it);
    return ok_status();
  };
  int dp = 0, sp = 0, reshard = 1;
  TERA_RETURN_IF_ERROR(integer("tp", &l.tp));
  TERA_RETURN_IF_ERROR(integer("pp", &l.pp));
  TERA_RETURN_IF_ERROR(integer("dp", &dp));
  TERA_RETURN_IF_ERROR(integer("cp", &l.cp));
  TERA_RETURN_IF_ERROR(integer("vpp", &l.vpp));
  TERA_RETURN_IF_ERROR(integer("mb", &l.micro_batch));
  TERA_RETURN_IF_ERROR(integer("zero", &l.zero));
  TERA_RETURN_IF_ERROR(integer("sp", &sp));
  if (sp > 1) return Status::error("layout key sp must be 0 or 1");
  l.sequence_parallel = sp == 1;
  TERA_RETURN_IF_ERROR(integer("shard", &l.shard));
  TERA_RETURN_IF_ERROR(integer("reshard", &reshard));
  if (reshard > 1) return Status::error("layout key reshard must be 0 or 1 (FSDP's reshard_after_forward)");
  l.reshard_after_forward = reshard == 1;
  if (l.tp < 1 || l.pp < 1 || l.vpp < 1 || l.micro_batch < 1 || l.cp < 1) {
    return Status::error("layout: tp, pp, cp, vpp and mb must be >= 1 in '" + text + "'");
  }
  if (auto it = kv.find("recompute"); it != kv.end()) {
    auto r = parse_recompute(it->second);
    if (!r) return Status::error("layout key recompute=" + it->second + ": choose none, selective or full");
    l.recompute = *r;
    kv.erase(it);
  }
  l.schedule = l.vpp > 1 ? ScheduleKind::interleaved : ScheduleKind::one_f_one_b;
  if (auto it = kv.find("schedule"); it != kv.end()) {
    auto k = parse_schedule_kind(it->second);
    if (!k.ok()) return Status::error("layout key schedule: " + k.error());
    l.schedule = *k;
    kv.erase(it);
  }
  if (auto it = kv.find("stage_layers"); it != kv.end()) {
    for (const std::string& n : split(it->second, '/')) {
      auto v = parse_count("stage_layers", n);
      if (!v) return Status::error("layout key stage_layers=" + it->second + ": write the layers of each virtual stage "
                                   "separated by '/', e.g. stage_layers=3/2/2/1");
      l.stage_layers.push_back(*v);
    }
    kv.erase(it);
  }
  if (!kv.empty()) {
    return Status::error("unknown layout key '" + kv.begin()->first +
                         "'; the keys are tp, pp, dp, cp, vpp, mb, zero, shard, reshard, sp, recompute, schedule, stage_layers");
  }
  if (dp == 0) {
    if (gpus <= 0) return Status::error("layout: give dp=N (or --gpus so that dp = gpus / (tp * pp))");
    if (gpus % (l.tp * l.pp * l.cp) != 0) {
      return Status::error(fmt::format("layout: tp({}) * pp({}) * cp({}) = {} does not divide gpus {}; give dp explicitly",
                                       l.tp, l.pp, l.cp, l.tp * l.pp * l.cp, gpus));
    }
    dp = gpus / (l.tp * l.pp * l.cp);
  }
  l.dp = dp;
  return l;
}

}  // namespace tera
