// Layout strings, checks and the layer split over virtual stages.
#include "plan/layout.h"

#include "core/strings.h"

#include <fmt/format.h>

#include <charconv>
#include <map>

namespace tera {

const char* precision_name(Precision p) { return p == Precision::fp32 ? "fp32" : "mixed"; }

Expected<Precision> parse_precision(const std::string& s) {
  if (s == "fp32") return Precision::fp32;
  if (s == "mixed" || s == "bf16" || s == "fp16") return Precision::mixed;
  return Status::error("unknown precision '" + s + "'; choose mixed (16-bit with fp32 master weights) or fp32");
}

PrecisionBytes precision_bytes(Precision p) {
  if (p == Precision::fp32) return {4, 4, 0, 8, DType::f32};
  return {2, 4, 4, 8, DType::bf16};
}

int64_t grad_bytes(const PrecisionBytes& pb, int zero) { return zero >= 2 ? pb.param : pb.grad; }

int64_t micro_batches(const PlanLayout& l, const Workload& w) {
  return w.global_batch / (static_cast<int64_t>(l.dp) * l.micro_batch);
}

std::string layout_string(const PlanLayout& l) {
  return fmt::format("tp={},pp={},dp={},{}vpp={},mb={},zero={},sp={},recompute={},schedule={}", l.tp, l.pp, l.dp,
                     l.cp > 1 ? fmt::format("cp={},", l.cp) : "", l.vpp, l.micro_batch, l.zero,
                     l.sequence_parallel ? 1 : 0, recompute_name(l.recompute), schedule_kind_name(l.schedule));
}

Expected<PlanLayout> parse_layout(const std::string& text, int gpus) {
  PlanLayout l;
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
    int v = 0;
    const auto& s = it->second;
    auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
    if (ec != std::errc() || p != s.data() + s.size() || v < 0) {
      return Status::error("layout key " + key + "=" + s + " must be a non-negative integer");
    }
    *out = v;
    kv.erase(it);
    return ok_status();
  };
  int dp = 0, sp = 0;
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
  if (l.tp < 1 || l.pp < 1 || l.vpp < 1 || l.micro_batch < 1 || l.cp < 1) {
    return Status::error("layout: tp, pp, cp, vpp and mb must be >= 1 in '" + text + "'");
  }
  if (auto it = kv.find("recompute"); it != kv.end()) {
    if (it->second == "none") l.recompute = Recompute::none;
    else if (it->second == "selective") l.recompute = Recompute::selective;
    else if (it->second == "full") l.recompute = Recompute::full;
    else return Status::error("layout key recompute=" + it->second + ": choose none, selective or full");
    kv.erase(it);
  }
  l.schedule = l.vpp > 1 ? ScheduleKind::interleaved : ScheduleKind::one_f_one_b;
  if (auto it = kv.find("schedule"); it != kv.end()) {
    auto k = parse_schedule_kind(it->second);
    if (!k.ok()) return Status::error("layout key schedule: " + k.error());
    l.schedule = *k;
    kv.erase(it);
  }
  if (!kv.empty()) {
    return Status::error("unknown layout key '" + kv.begin()->first +
                         "'; the keys are tp, pp, dp, vpp, mb, zero, sp, recompute, schedule");
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

Status check_layout(const PlanLayout& l, const Workload& w, int gpus) {
  const ModelConfig& m = w.model;
  if (gpus > 0 && l.gpus() != gpus) {
    if (l.cp > 1) {
      return Status::error(fmt::format("tp({}) * pp({}) * dp({}) * cp({}) = {} != gpus {}", l.tp, l.pp, l.dp, l.cp,
                                       l.gpus(), gpus));
    }
    return Status::error(fmt::format("tp({}) * pp({}) * dp({}) = {} != gpus {}", l.tp, l.pp, l.dp, l.gpus(), gpus));
  }
  if (l.cp > 1 && m.seq_len % (2 * l.cp) != 0) {
    // Load-balanced causal ring attention splits each sequence into 2 * cp chunks.
    return Status::error(fmt::format("context parallelism needs 2 * cp({}) to divide seq_len({})", l.cp, m.seq_len));
  }
  if (l.cp > 1 && l.sequence_parallel && (m.seq_len / l.cp) % l.tp != 0) {
    return Status::error(fmt::format("sequence parallelism needs tp({}) to divide seq_len / cp({})", l.tp,
                                     m.seq_len / l.cp));
  }
  if (m.heads % l.tp != 0 || m.kv() % l.tp != 0 || m.hidden % l.tp != 0 || m.ffn() % l.tp != 0) {
    return Status::error(fmt::format("tp({}) must divide heads({}), kv_heads({}), hidden({}) and ffn_hidden({})",
                                     l.tp, m.heads, m.kv(), m.hidden, m.ffn()));
  }
  if (l.sequence_parallel && m.seq_len % l.tp != 0) {
    return Status::error(fmt::format("sequence parallelism needs tp({}) to divide seq_len({})", l.tp, m.seq_len));
  }
  if (l.zero < 0 || l.zero > 3) return Status::error(fmt::format("zero = {} must be 0, 1, 2 or 3", l.zero));
  const int64_t per_replica = static_cast<int64_t>(l.dp) * l.micro_batch;
  if (w.global_batch % per_replica != 0) {
    return Status::error(fmt::format("global batch {} is not divisible by dp({}) * micro_batch({}) = {}",
                                     w.global_batch, l.dp, l.micro_batch, per_replica));
  }
  const int64_t M = micro_batches(l, w);
  const int64_t V = static_cast<int64_t>(l.pp) * l.vpp;
  if (m.layers < V) {
    return Status::error(fmt::format("layers({}) < pp({}) * vpp({}) = {}: every virtual stage needs a layer",
                                     m.layers, l.pp, l.vpp, V));
  }
  if (l.schedule == ScheduleKind::interleaved || l.vpp > 1) {
    if (l.schedule != ScheduleKind::interleaved) {
      return Status::error(fmt::format("vpp({}) > 1 needs the interleaved schedule", l.vpp));
    }
    if (m.layers % V != 0) {
      return Status::error(fmt::format("interleaving needs pp({}) * vpp({}) = {} to divide layers({})", l.pp, l.vpp,
                                       V, m.layers));
    }
  }
  // The schedule's own conditions (make_schedule checks the same).
  if (l.schedule == ScheduleKind::interleaved) {
    if (l.pp < 2 || l.vpp < 2) {
      return Status::error(fmt::format("the interleaved schedule needs pp >= 2 and vpp >= 2, got pp({}), vpp({})",
                                       l.pp, l.vpp));
    }
    if (M % l.pp != 0) {
      return Status::error(fmt::format("the interleaved schedule needs micro_batches % pp == 0: global batch {} / "
                                       "(dp({}) * micro_batch({})) = {} micro-batches, pp({})",
                                       w.global_batch, l.dp, l.micro_batch, M, l.pp));
    }
  }
  return ok_status();
}

int64_t layers_in_virtual_stage(const PlanLayout& l, int64_t layers, int v) {
  const int64_t V = static_cast<int64_t>(l.pp) * l.vpp;
  return layers / V + (v < layers % V ? 1 : 0);
}

}  // namespace tera
