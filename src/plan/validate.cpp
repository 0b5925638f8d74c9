// Row -> workload, layout constraints, cluster and metric; then search or
// evaluate. Column vocabulary (shared/calibration/README.md): precision
// "fp16"/"bf16"/"mixed"/"fp32"; zero_fsdp_distopt "none (DDP-impl local)" (a
// reduction that waits for backward), "ZeRO-k", "FSDP", "distributed
// optimizer"; activation_recompute "full"/"selective"/"none"; util_metric
// naming MFU, or Megatron's hardware-FLOP convention ("% of peak", "HFU",
// "incl. recompute", "same FLOP convention as Table 1").
#include "plan/validate.h"

#include <fmt/format.h>

#include <algorithm>
#include <charconv>
#include <cmath>

namespace tera {

const char* metric_name(MetricKind m) {
  switch (m) {
    case MetricKind::tflops_per_gpu: return "tflops_per_gpu";
    case MetricKind::util_pct: return "util_pct";
    case MetricKind::iteration_time_s: return "iteration_time_s";
    case MetricKind::tokens_per_s_per_gpu: return "tokens_per_s_per_gpu";
    case MetricKind::tokens_per_s: return "tokens_per_s";
    case MetricKind::seq_per_s: return "seq_per_s";
  }
  return "?";
}

namespace {

std::string lower(std::string s) {
  std::transform(s.begin(), s.end(), s.begin(), [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return s;
}

bool contains(const std::string& hay, const char* needle) { return lower(hay).find(lower(needle)) != std::string::npos; }

struct RowReader {
  const std::map<std::string, std::string>& row;
  std::string where;  // "file:line (row_id N)"

  std::string text(const char* col) const {
    auto it = row.find(col);
    return it == row.end() ? "" : it->second;
  }
  bool has(const char* col) const { return !text(col).empty(); }
  Expected<double> number(const char* col) const {
    const std::string s = text(col);
    double v = 0;
    auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
    if (s.empty() || ec != std::errc() || p != s.data() + s.size() || !std::isfinite(v)) {
      return Status::error(fmt::format("{}: column {} = '{}' is not a number; fix the value", where, col, s));
    }
    return v;
  }
  Expected<int64_t> integer(const char* col) const {
    auto v = number(col);
    if (!v.ok()) return v.status();
    if (*v < 0 || *v != std::floor(*v)) {
      return Status::error(fmt::format("{}: column {} = '{}' must be a non-negative integer", where, col, text(col)));
    }
    return static_cast<int64_t>(*v);
  }
};

// Which preset a row's hardware runs on ("" when none does).
std::string cluster_for(const std::string& gpu_type) {
  if (contains(gpu_type, "A100")) return "selene";
  if (contains(gpu_type, "H100")) return "dgx-h100";
  if (contains(gpu_type, "H200")) return "dgx-h200";
  if (contains(gpu_type, "MI250X")) return "frontier";
  return "";
}

#define TERA_ASSIGN_OR_RETURN(lhs, expr) \
  auto lhs##_e = (expr);                 \
  if (!lhs##_e.ok()) return lhs##_e.status(); \
  auto lhs = *lhs##_e

Expected<RowPrediction> predict_row(const RowReader& r, ClusterLoader load) {
  RowPrediction p;
  p.row_id = r.text("row_id");
  p.model = r.text("model");
  // Model.
  Workload w;
  ModelConfig& m = w.model;
  TERA_ASSIGN_OR_RETURN(layers, r.integer("layers"));
  TERA_ASSIGN_OR_RETURN(hidden, r.integer("hidden"));
  TERA_ASSIGN_OR_RETURN(heads, r.integer("heads"));
  TERA_ASSIGN_OR_RETURN(seq, r.integer("seq_len"));
  m.layers = layers;
  m.hidden = hidden;
  m.heads = heads;
  m.seq_len = seq;
  m.vocab_align = 1;  // sources state the (already padded) vocabulary they used
  if (r.has("vocab")) {
    TERA_ASSIGN_OR_RETURN(v, r.integer("vocab"));
    m.vocab = v;
  } else {
    m.vocab = 51200;  // GPT-2 BPE padded as Megatron-LM does
    p.flags.push_back("vocab=51200 assumed");
  }
  if (r.has("ffn_hidden")) {
    TERA_ASSIGN_OR_RETURN(f, r.integer("ffn_hidden"));
    m.ffn_hidden = f;
  } else {
    p.flags.push_back("ffn_hidden=4h assumed");
  }
  if (r.has("kv_heads")) {
    TERA_ASSIGN_OR_RETURN(kv, r.integer("kv_heads"));
    m.kv_heads = kv;
  }
  if (r.has("mlp")) {
    auto k = parse_mlp_kind(r.text("mlp"));
    if (!k.ok()) return Status::error(r.where + ": column mlp: " + k.error());
    m.mlp = *k;
  }
  if (Status s = validate_model_config(m); !s) return Status::error(r.where + ": " + s.message());
  const std::string prec = lower(r.text("precision"));
  w.precision = contains(prec, "fp32") && !contains(prec, "mixed") ? Precision::fp32 : Precision::mixed;
  if (!contains(prec, "fp16") && !contains(prec, "bf16") && !contains(prec, "mixed") && !contains(prec, "fp32")) {
    p.flags.push_back("precision=mixed assumed");
  }
  TERA_ASSIGN_OR_RETURN(gpus, r.integer("num_gpus"));
  if (gpus < 1) return Status::error(r.where + ": num_gpus must be positive");
  p.gpus = static_cast<int>(gpus);
  if (r.has("cp")) {
    TERA_ASSIGN_OR_RETURN(cp, r.integer("cp"));
    if (cp > 1) {
      p.skip_reason = fmt::format("context parallelism (cp = {}) is not modelled", cp);
      return p;
    }
  }
  const std::string preset = cluster_for(r.text("gpu_type"));
  if (preset.empty()) {
    p.skip_reason = fmt::format("gpu_type '{}' has no cluster preset (A100, H100, H200, MI250X)", r.text("gpu_type"));
    return p;
  }
  int64_t gb = 0;
  if (r.has("global_batch_seqs")) {
    TERA_ASSIGN_OR_RETURN(g, r.integer("global_batch_seqs"));
    gb = g;
  } else if (r.has("micro_batch") && r.has("grad_accum") && (r.has("dp") || (r.has("tp") && r.has("pp")))) {
    TERA_ASSIGN_OR_RETURN(mb, r.integer("micro_batch"));
    TERA_ASSIGN_OR_RETURN(acc, r.integer("grad_accum"));
    int64_t dp = 0;
    if (r.has("dp")) {
      TERA_ASSIGN_OR_RETURN(d, r.integer("dp"));
      dp = d;
    } else {
      TERA_ASSIGN_OR_RETURN(tp, r.integer("tp"));
      TERA_ASSIGN_OR_RETURN(pp, r.integer("pp"));
      dp = tp * pp > 0 ? gpus / (tp * pp) : 0;
    }
    gb = mb * acc * dp;
    p.flags.push_back("global batch = micro_batch x grad_accum x dp");
  }
  if (gb < 1) return Status::error(r.where + ": global_batch_seqs is missing or not positive; give it (sequences per step)");
  w.global_batch = gb;
  // Cluster.
  auto cl_e = load(preset);
  if (!cl_e.ok()) return Status::error(r.where + ": " + cl_e.error());
  Cluster cl = *cl_e;
  p.cluster = preset;
  if (contains(r.text("gpu_type"), "40GB")) cl.gpu.memory_bytes = 40.0 * (1 << 30);
  // Layout constraints.
  SearchSpace space;
  space.max_micro_batch = 32;
  auto fixed_int = [&](const char* col, std::optional<int>* out) -> Status {
    if (!r.has(col)) return Status::ok();
    auto v = r.integer(col);
    if (!v.ok()) return v.status();
    if (*v < 1) return Status::error(fmt::format("{}: column {} must be >= 1", r.where, col));
    *out = static_cast<int>(*v);
    return Status::ok();
  };
  TERA_RETURN_IF_ERROR(fixed_int("tp", &space.tp));
  TERA_RETURN_IF_ERROR(fixed_int("pp", &space.pp));
  TERA_RETURN_IF_ERROR(fixed_int("dp", &space.dp));
  TERA_RETURN_IF_ERROR(fixed_int("micro_batch", &space.micro_batch));
  if (space.tp && space.pp && !space.dp) space.dp = p.gpus / (*space.tp * *space.pp);
  if (!space.tp) p.flags.push_back("tp chosen");
  if (!space.pp) p.flags.push_back("pp chosen");
  if (!space.micro_batch) p.flags.push_back("micro_batch chosen");
  const std::string sp = lower(r.text("sequence_parallel"));
  if (sp == "yes" || sp == "true") space.sequence_parallel = true;
  else if (sp == "no" || sp == "false") space.sequence_parallel = false;
  else p.flags.push_back("sequence_parallel chosen");
  if (space.pp && *space.pp == 1) {
    space.vpp = 1;
  } else if (r.has("vpp_chunks")) {
    TERA_RETURN_IF_ERROR(fixed_int("vpp_chunks", &space.vpp));
  } else {
    p.flags.push_back("vpp chosen");
  }
  const std::string zero = lower(r.text("zero_fsdp_distopt"));
  if (contains(zero, "zero-3") || contains(zero, "fsdp")) space.zero = 3;
  else if (contains(zero, "zero-2")) space.zero = 2;
  else if (contains(zero, "zero-1") || contains(zero, "distributed optimizer") || contains(zero, "distopt")) space.zero = 1;
  else if (zero.rfind("none", 0) == 0 && zero != "none stated") space.zero = 0;
  if (!space.zero && space.dp.value_or(2) > 1) p.flags.push_back("zero chosen");
  if (contains(zero, "ddp-impl local")) cl.stack.dp_overlap = false;  // Megatron's local DDP reduces after backward
  // Metric and its FLOP convention.
  const std::string um = r.text("util_metric");
  static const std::pair<MetricKind, const char*> kOutcomes[] = {
      {MetricKind::tflops_per_gpu, "reported_tflops_per_gpu"},
      {MetricKind::util_pct, "reported_util_pct"},
      {MetricKind::iteration_time_s, "iteration_time_s"},
      {MetricKind::tokens_per_s_per_gpu, "throughput_tokens_per_s_per_gpu"},
      {MetricKind::tokens_per_s, "throughput_tokens_per_s"},
      {MetricKind::seq_per_s, "throughput_seq_per_s"}};
  const char* col = nullptr;
  for (const auto& [kind, name] : kOutcomes) {
    if (r.has(name)) {
      p.metric = kind;
      col = name;
      break;
    }
  }
  if (!col) {
    return Status::error(r.where + ": no outcome to predict; give reported_tflops_per_gpu, reported_util_pct, "
                                   "iteration_time_s or a throughput column");
  }
  TERA_ASSIGN_OR_RETURN(reported, r.number(col));
  p.reported = reported;
  const ModelSpec spec(m);
  const double tokens = static_cast<double>(gb * seq);
  const double f_model = tokens * spec.train_flops_per_token(false), f_eq3 = tokens * spec.train_flops_per_token(true);
  if (contains(um, "MFU")) {
    p.convention = FlopConvention::model;
  } else if (contains(um, "HFU") || contains(um, "recompute") || contains(um, "hardware") || contains(um, "Table 1") ||
             contains(um, "% of peak")) {
    p.convention = FlopConvention::megatron_eq3;
  } else if (p.metric == MetricKind::tflops_per_gpu && r.has("iteration_time_s")) {
    // Both given: the FLOPs they imply tell which formula the source used.
    TERA_ASSIGN_OR_RETURN(t, r.number("iteration_time_s"));
    const double implied = reported * 1e12 * static_cast<double>(gpus) * t;
    p.convention = std::fabs(implied - f_eq3) < std::fabs(implied - f_model) ? FlopConvention::megatron_eq3
                                                                            : FlopConvention::model;
    p.flags.push_back("FLOP convention inferred from time x TFLOP/s");
  } else if (p.metric != MetricKind::iteration_time_s) {
    p.flags.push_back("FLOP convention assumed model");
  }
  const std::string rc = lower(r.text("activation_recompute"));
  if (rc.rfind("full", 0) == 0) space.recompute = Recompute::full;
  else if (rc.rfind("selective", 0) == 0) space.recompute = Recompute::selective;
  else if (rc.rfind("none", 0) == 0) space.recompute = Recompute::none;
  else if (p.convention == FlopConvention::megatron_eq3 && p.metric != MetricKind::iteration_time_s) {
    // A source that counts the recomputed forward in its FLOPs recomputed.
    space.recompute = Recompute::full;
    p.flags.push_back("recompute=full inferred from the FLOP convention");
  } else {
    p.flags.push_back("recompute chosen");
  }
  // Price: the row's own layout when complete, else the best completion.
  Evaluation e;
  const bool complete = space.tp && space.pp && space.dp && space.micro_batch && space.vpp && space.zero &&
                        space.sequence_parallel && space.recompute;
  if (complete) {
    PlanLayout l;
    l.tp = *space.tp;
    l.pp = *space.pp;
    l.dp = *space.dp;
    l.vpp = *space.vpp;
    l.micro_batch = *space.micro_batch;
    l.zero = *space.zero;
    l.sequence_parallel = *space.sequence_parallel;
    l.recompute = *space.recompute;
    l.schedule = l.vpp > 1 ? ScheduleKind::interleaved : ScheduleKind::one_f_one_b;
    if (Status s = check_layout(l, w, p.gpus); !s) {
      p.skip_reason = "the row's layout is inconsistent: " + s.message();
      return p;
    }
    e = evaluate_layout(spec, l, w, cl);
  } else {
    SearchResult sr = search_layouts(spec, w, cl, p.gpus, space, 1);
    if (!sr.best.empty()) {
      e = sr.best.front();
    } else if (sr.smallest) {  // the run happened; price the least demanding completion
      e = evaluate_layout(spec, *sr.smallest, w, cl);
    } else {
      // Say which of the row's own settings rules everything out.
      PlanLayout given;
      given.tp = space.tp.value_or(1);
      given.pp = space.pp.value_or(1);
      given.dp = space.dp.value_or(p.gpus / (given.tp * given.pp));
      given.micro_batch = space.micro_batch.value_or(1);
      given.vpp = space.vpp.value_or(1);
      given.schedule = given.vpp > 1 ? ScheduleKind::interleaved : ScheduleKind::one_f_one_b;
      const Status why = check_layout(given, w, p.gpus);
      p.skip_reason = "no layout matches the row's tp/pp/dp/micro_batch/vpp: " +
                      (why ? std::string("tp must divide the GPUs of a node") : why.message());
      return p;
    }
  }
  p.layout = e.layout;
  p.fits = e.fits;
  if (!e.fits) p.flags.push_back("over memory per the model");
  const double flops = p.convention == FlopConvention::model ? f_model : f_eq3;
  const double tflops = flops / e.step_time_s / p.gpus / 1e12;
  double peak = cl.gpu.peak_flops_16 / 1e12;
  if (r.has("gpu_peak_tflops_used_by_source")) {
    TERA_ASSIGN_OR_RETURN(src_peak, r.number("gpu_peak_tflops_used_by_source"));
    peak = src_peak;
  }
  const double tokens_per_s = tokens / e.step_time_s;
  switch (p.metric) {
    case MetricKind::tflops_per_gpu: p.predicted = tflops; break;
    case MetricKind::util_pct: p.predicted = 100 * tflops / peak; break;
    case MetricKind::iteration_time_s: p.predicted = e.step_time_s; break;
    case MetricKind::tokens_per_s_per_gpu: p.predicted = tokens_per_s / p.gpus; break;
    case MetricKind::tokens_per_s: p.predicted = tokens_per_s; break;
    case MetricKind::seq_per_s: p.predicted = static_cast<double>(gb) / e.step_time_s; break;
  }
  p.rel_error = (p.predicted - p.reported) / p.reported;
  return p;
}

}  // namespace

Expected<ValidationReport> validate_runs(const std::vector<CsvTable>& tables, const std::vector<std::string>& wheres,
                                         ClusterLoader load) {
  ValidationReport rep;
  std::vector<double> errs;
  for (size_t t = 0; t < tables.size(); ++t) {
    const CsvTable& table = tables[t];
    const std::string& where = wheres.at(t);
    for (const char* col : {"row_id", "layers", "hidden", "heads", "seq_len", "num_gpus", "gpu_type"}) {
      if (std::find(table.header.begin(), table.header.end(), col) == table.header.end()) {
        return Status::error(fmt::format("{}: missing column '{}'; the schema is shared/calibration/published_runs.csv's",
                                         where, col));
      }
    }
    for (size_t i = 0; i < table.rows.size(); ++i) {
      const auto& row = table.rows[i];
      RowReader r{row, fmt::format("{}:{} (row_id {})", where, table.row_lines[i], row.at("row_id"))};
      auto p = predict_row(r, load);
      if (!p.ok()) {  // the message names the file, line, row id and column
        rep.skipped.push_back(p.error());
        continue;
      }
      if (!p->skip_reason.empty()) {
        rep.skipped.push_back("row_id " + p->row_id + " (" + where + "): " + p->skip_reason);
        continue;
      }
      errs.push_back(std::fabs(p->rel_error));
      rep.rows.push_back(std::move(*p));
    }
  }
  if (!errs.empty()) {
    std::sort(errs.begin(), errs.end());
    const size_t n = errs.size();
    rep.median_abs_error = n % 2 ? errs[n / 2] : 0.5 * (errs[n / 2 - 1] + errs[n / 2]);
    rep.max_abs_error = errs.back();
  }
  return rep;
}

Expected<ValidationReport> validate_runs(const CsvTable& table, const std::string& where, ClusterLoader load) {
  return validate_runs(std::vector<CsvTable>{table}, std::vector<std::string>{where}, load);
}

}  // namespace tera
