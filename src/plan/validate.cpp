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
  // The 500 W HBM2e H100 (torchtitan's Grand Teton hosts) is its own part.
  if (contains(gpu_type, "H100") && contains(gpu_type, "HBM2e")) return "h100-hbm2e";
  if (contains(gpu_type, "H100")) return "dgx-h100";
  if (contains(gpu_type, "H200")) return "dgx-h200";
  if (contains(gpu_type, "MI250X")) return "frontier";
  return "";
}

#define TERA_ASSIGN_OR_RETURN(lhs, expr) \
  auto lhs##_e = (expr);                 \
  if (!lhs##_e.ok()) return lhs##_e.status(); \
  auto lhs = *lhs##_e

// A row read and checked, ready to price under any profile parameters.
struct RowCase {
  RowPrediction p;  // row id, source, metric, reported, flags
  Workload w;
  Cluster cl;       // the preset, before the profile
  StackProfile profile;
  SearchSpace space;
  bool complete = false;
  ParallelLayout fixed;  // when complete
  double f_model = 0, f_eq3 = 0, peak = 0, tokens = 0;
  int64_t gb = 0;
};

// The model columns, the Llama family's untied embeddings and the precision into `w`; assumptions flagged on `p`.
Status parse_model(const RowReader& r, Workload* w, RowPrediction* p) {
  ModelConfig& m = w->model;
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
    p->flags.push_back("vocab=51200 assumed");
  }
  if (r.has("ffn_hidden")) {
    TERA_ASSIGN_OR_RETURN(f, r.integer("ffn_hidden"));
    m.ffn_hidden = f;
  } else {
    p->flags.push_back("ffn_hidden=4h assumed");
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
  // The gated-MLP family (Llama) unties its input and output embeddings.
  if (untied_by_family(m)) {
    w->untied_embeddings = true;
    p->flags.push_back("untied embeddings (Llama family)");
  }
  if (Status s = validate_model_config(m); !s) return Status::error(r.where + ": " + s.message());
  const std::string prec = lower(r.text("precision"));
  w->precision = contains(prec, "fp32") && !contains(prec, "mixed") ? Precision::fp32 : Precision::mixed;
  w->fp8_gemms = contains(prec, "fp8");  // float8 linear layers; the rest bf16 with fp32 masters
  if (!contains(prec, "fp16") && !contains(prec, "bf16") && !contains(prec, "mixed") && !contains(prec, "fp32") &&
      !w->fp8_gemms) {
    p->flags.push_back("precision=mixed assumed");
  }
  return ok_status();
}

// The context-parallel degree (1 when the row has no cp column).
Expected<int> parse_cp(const RowReader& r) {
  int cp = 1;
  if (r.has("cp")) {
    TERA_ASSIGN_OR_RETURN(c, r.integer("cp"));
    if (c < 1) return Status::error(r.where + ": column cp must be >= 1");
    cp = static_cast<int>(c);
  }
  return cp;
}

// Sequences per step: global_batch_seqs, else micro_batch x grad_accum x dp (dp from tp and pp when absent).
Expected<int64_t> parse_global_batch(const RowReader& r, int64_t gpus, int cp, RowPrediction* p) {
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
      dp = tp * pp > 0 ? gpus / (tp * pp * cp) : 0;
    }
    gb = mb * acc * dp;
    p->flags.push_back("global batch = micro_batch x grad_accum x dp");
  }
  if (gb < 1) return Status::error(r.where + ": global_batch_seqs is missing or not positive; give it (sequences per step)");
  return gb;
}

// The row's cluster preset into c->cl (40 GB parts as such); an fp8 row on a part with no fp8 peak is skipped.
Status load_cluster(const RowReader& r, const std::string& preset, ClusterLoader load, RowCase* c) {
  RowPrediction& p = c->p;
  auto cl_e = load(preset);
  if (!cl_e.ok()) return Status::error(r.where + ": " + cl_e.error());
  c->cl = *cl_e;
  p.cluster = preset;
  if (contains(r.text("gpu_type"), "40GB")) c->cl.gpu.memory_bytes = 40.0 * (1 << 30);
  if (c->w.fp8_gemms && c->cl.gpu.peak_flops_8 <= 0) {
    p.skip_reason = fmt::format("fp8 run on {} ({}), which has no fp8 peak to price it with", c->cl.gpu.name, preset);
  }
  return ok_status();
}

// A layout setting the row fixes: column `col` (>= 1) into *out; left open when absent.
Status fixed_int(const RowReader& r, const char* col, std::optional<int>* out) {
  if (!r.has(col)) return ok_status();
  auto v = r.integer(col);
  if (!v.ok()) return v.status();
  if (*v < 1) return Status::error(fmt::format("{}: column {} must be >= 1", r.where, col));
  *out = static_cast<int>(*v);
  return ok_status();
}

// The ZeRO stage from zero_fsdp_distopt (open when the column names none); Megatron's local DDP reduces after backward.
void parse_zero(const RowReader& r, RowCase* c) {
  SearchSpace& space = c->space;
  RowPrediction& p = c->p;
  const std::string zero = lower(r.text("zero_fsdp_distopt"));
  if (contains(zero, "zero-3") || contains(zero, "fsdp")) space.zero = 3;
  else if (contains(zero, "zero-2")) space.zero = 2;
  else if (contains(zero, "zero-1") || contains(zero, "distributed optimizer") || contains(zero, "distopt")) space.zero = 1;
  else if (zero.rfind("none", 0) == 0 && zero != "none stated") space.zero = 0;
  if (!space.zero && c->profile.zero_stages == 0) {
    space.zero = 0;
    p.flags.push_back("zero=0 (the stack has no ZeRO)");
  }
  if (!space.zero && space.dp.value_or(2) > 1) p.flags.push_back("zero chosen");
  if (contains(zero, "ddp-impl local")) c->cl.stack.dp_overlap = false;  // Megatron's local DDP reduces after backward
}

// The layout settings the row fixes into c->space; each one left to the search is flagged.
Status parse_space(const RowReader& r, int cp, RowCase* c) {
  SearchSpace& space = c->space;
  RowPrediction& p = c->p;
  space.max_micro_batch = 32;
  TERA_RETURN_IF_ERROR(fixed_int(r, "tp", &space.tp));
  TERA_RETURN_IF_ERROR(fixed_int(r, "pp", &space.pp));
  TERA_RETURN_IF_ERROR(fixed_int(r, "dp", &space.dp));
  TERA_RETURN_IF_ERROR(fixed_int(r, "micro_batch", &space.micro_batch));
  space.cp = cp;
  if (space.tp && space.pp && !space.dp) space.dp = p.gpus / (*space.tp * *space.pp * cp);
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
    TERA_RETURN_IF_ERROR(fixed_int(r, "vpp_chunks", &space.vpp));
  } else {
    p.flags.push_back("vpp chosen");
  }
  parse_zero(r, c);
  return ok_status();
}

// The outcome to predict into p->metric and p->reported: the first reported column, a
// rate per GPU before a utilisation in another convention than Megatron's.
Status parse_outcome(const RowReader& r, RowPrediction* p) {
  // A measured rate per GPU is preferred to a utilisation in a convention
  // other than Megatron's (torchtitan's MFU counts its own FLOPs and divisor).
  const bool rate_first = r.has("throughput_tokens_per_s_per_gpu") && !r.has("reported_tflops_per_gpu");
  static const std::pair<MetricKind, const char*> kOutcomes[] = {
      {MetricKind::tflops_per_gpu, "reported_tflops_per_gpu"},
      {MetricKind::util_pct, "reported_util_pct"},
      {MetricKind::iteration_time_s, "iteration_time_s"},
      {MetricKind::tokens_per_s_per_gpu, "throughput_tokens_per_s_per_gpu"},
      {MetricKind::tokens_per_s, "throughput_tokens_per_s"},
      {MetricKind::seq_per_s, "throughput_seq_per_s"}};
  const char* col = nullptr;
  for (const auto& [kind, name] : kOutcomes) {
    if (rate_first && kind == MetricKind::util_pct) continue;
    if (r.has(name)) {
      p->metric = kind;
      col = name;
      break;
    }
  }
  if (!col) {
    return Status::error(r.where + ": no outcome to predict; give reported_tflops_per_gpu, reported_util_pct, "
                                   "iteration_time_s or a throughput column");
  }
  TERA_ASSIGN_OR_RETURN(reported, r.number(col));
  if (!(reported > 0) || !std::isfinite(reported)) {
    // An error relative to 0 or to a negative figure means nothing (+inf%, 202%).
    return Status::error(fmt::format("{}: {} = {} cannot be scored; a reported figure must be a positive number", r.where,
                                     col, reported));
  }
  p->reported = reported;
  return ok_status();
}

// The FLOP convention of the reported figure from util_metric, else from the FLOPs that time x TFLOP/s imply.
Status parse_convention(const RowReader& r, int64_t gpus, double f_model, double f_eq3, RowPrediction* p) {
  const std::string um = r.text("util_metric");
  if (contains(um, "MFU")) {
    p->convention = FlopConvention::model;
  } else if (contains(um, "HFU") || contains(um, "recompute") || contains(um, "hardware") || contains(um, "Table 1") ||
             contains(um, "% of peak")) {
    p->convention = FlopConvention::megatron_eq3;
  } else if (p->metric == MetricKind::tflops_per_gpu && r.has("iteration_time_s")) {
    // Both given: the FLOPs they imply tell which formula the source used.
    TERA_ASSIGN_OR_RETURN(t, r.number("iteration_time_s"));
    const double implied = p->reported * 1e12 * static_cast<double>(gpus) * t;
    p->convention = std::fabs(implied - f_eq3) < std::fabs(implied - f_model) ? FlopConvention::megatron_eq3
                                                                             : FlopConvention::model;
    p->flags.push_back("FLOP convention inferred from time x TFLOP/s");
  } else if (p->metric != MetricKind::iteration_time_s) {
    p->flags.push_back("FLOP convention assumed model");
  }
  return ok_status();
}

// Activation recompute from its column, else full when the FLOP convention counts the recomputed forward.
void parse_recompute(const RowReader& r, SearchSpace* space, RowPrediction* p) {
  const std::string rc = lower(r.text("activation_recompute"));
  if (rc.rfind("full", 0) == 0) space->recompute = Recompute::full;
  else if (rc.rfind("selective", 0) == 0) space->recompute = Recompute::selective;
  else if (rc.rfind("none", 0) == 0) space->recompute = Recompute::none;
  else if (p->convention == FlopConvention::megatron_eq3 && p->metric != MetricKind::iteration_time_s) {
    // A source that counts the recomputed forward in its FLOPs recomputed.
    space->recompute = Recompute::full;
    p->flags.push_back("recompute=full inferred from the FLOP convention");
  } else {
    p->flags.push_back("recompute chosen");
  }
}

// When the row fixes every setting, its layout into c->fixed; an inconsistent one skips the row.
void fix_layout(int cp, RowCase* c) {
  RowCase& rc_case = *c;
  const SearchSpace& space = rc_case.space;
  const Workload& w = rc_case.w;
  RowPrediction& p = rc_case.p;
  rc_case.complete = space.tp && space.pp && space.dp && space.micro_batch && space.vpp && space.zero &&
                     space.sequence_parallel && space.recompute;
  if (rc_case.complete) {
    ParallelLayout& l = rc_case.fixed;
    l.tp = *space.tp;
    l.pp = *space.pp;
    l.dp = *space.dp;
    l.cp = cp;
    l.vpp = *space.vpp;
    l.micro_batch = *space.micro_batch;
    l.zero = *space.zero;
    l.sequence_parallel = *space.sequence_parallel;
    l.recompute = *space.recompute;
    l.schedule = l.vpp > 1 ? ScheduleKind::interleaved : ScheduleKind::one_f_one_b;
    if (Status s = check_layout(l, w, p.gpus); !s) {
      p.skip_reason = "the row's layout is inconsistent: " + s.message();
    }
  }
}

// A row read and checked: model, GPUs, cluster, layout constraints, outcome and FLOP convention.
Expected<RowCase> parse_case(const RowReader& r, ClusterLoader load) {
  RowCase rc_case;
  RowPrediction& p = rc_case.p;
  p.row_id = r.text("row_id");
  p.source = r.text("source");
  p.model = r.text("model");
  rc_case.profile = profile_for_framework(r.text("framework"), r.text("zero_fsdp_distopt"));
  p.profile = rc_case.profile.name;
  TERA_RETURN_IF_ERROR(parse_model(r, &rc_case.w, &p));
  TERA_ASSIGN_OR_RETURN(gpus, r.integer("num_gpus"));
  if (gpus < 1) return Status::error(r.where + ": num_gpus must be positive");
  p.gpus = static_cast<int>(gpus);
  TERA_ASSIGN_OR_RETURN(cp, parse_cp(r));
  const std::string preset = cluster_for(r.text("gpu_type"));
  if (preset.empty()) {
    p.skip_reason = fmt::format("gpu_type '{}' has no cluster preset (A100, H100, H200, MI250X)", r.text("gpu_type"));
    return rc_case;
  }
  TERA_ASSIGN_OR_RETURN(gb, parse_global_batch(r, gpus, cp, &p));
  rc_case.w.global_batch = gb;
  TERA_RETURN_IF_ERROR(load_cluster(r, preset, load, &rc_case));
  if (!p.skip_reason.empty()) return rc_case;
  TERA_RETURN_IF_ERROR(parse_space(r, cp, &rc_case));
  // Metric and its FLOP convention.
  TERA_RETURN_IF_ERROR(parse_outcome(r, &p));
  const ModelSpec spec(rc_case.w.model);
  const double tokens = static_cast<double>(gb * rc_case.w.model.seq_len);
  const double f_model = tokens * spec.train_flops_per_token(false), f_eq3 = tokens * spec.train_flops_per_token(true);
  TERA_RETURN_IF_ERROR(parse_convention(r, gpus, f_model, f_eq3, &p));
  parse_recompute(r, &rc_case.space, &p);
  rc_case.gb = gb;
  rc_case.tokens = tokens;
  rc_case.f_model = f_model;
  rc_case.f_eq3 = f_eq3;
  rc_case.peak = rc_case.cl.gpu.peak_flops_16 / 1e12;
  if (r.has("gpu_peak_tflops_used_by_source")) {
    TERA_ASSIGN_OR_RETURN(src_peak, r.number("gpu_peak_tflops_used_by_source"));
    rc_case.peak = src_peak;
  }
  fix_layout(cp, &rc_case);
  return rc_case;
}

// Prices a row under profile parameters; `layout`, when set, is priced
// instead of searching (fits keep the layout found at the start).
RowPrediction price_case(const RowCase& c, const StackParams& params, const ParallelLayout* layout = nullptr) {
  RowPrediction p = c.p;
  StackProfile prof = c.profile;
  prof.params = params;
  const Cluster cl = apply_profile(c.cl, prof);
  const ModelSpec spec(c.w.model);
  const Workload& w = c.w;
  const SearchSpace& space = c.space;
  Evaluation e;
  if (layout) {
    e = evaluate_layout(spec, *layout, w, cl);
  } else if (c.complete) {
    e = evaluate_layout(spec, c.fixed, w, cl);
  } else {
    SearchResult sr = search_layouts(spec, w, cl, p.gpus, space, 1);
    if (!sr.best.empty()) {
      e = sr.best.front();
    } else if (sr.smallest) {  // the run happened; price the least demanding completion
      e = evaluate_layout(spec, *sr.smallest, w, cl);
    } else {
      // Say which of the row's own settings rules everything out.
      ParallelLayout given;
      given.tp = space.tp.value_or(1);
      given.pp = space.pp.value_or(1);
      given.cp = space.cp.value_or(1);
      given.dp = space.dp.value_or(p.gpus / (given.tp * given.pp * given.cp));
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
  const double flops = p.convention == FlopConvention::model ? c.f_model : c.f_eq3;
  const double tflops = flops / e.step_time_s / p.gpus / 1e12;
  const double tokens_per_s = c.tokens / e.step_time_s;
  switch (p.metric) {
    case MetricKind::tflops_per_gpu: p.predicted = tflops; break;
    case MetricKind::util_pct: p.predicted = 100 * tflops / c.peak; break;
    case MetricKind::iteration_time_s: p.predicted = e.step_time_s; break;
    case MetricKind::tokens_per_s_per_gpu: p.predicted = tokens_per_s / p.gpus; break;
    case MetricKind::tokens_per_s: p.predicted = tokens_per_s; break;
    case MetricKind::seq_per_s: p.predicted = static_cast<double>(c.gb) / e.step_time_s; break;
  }
  p.rel_error = (p.predicted - p.reported) / p.reported;
  return p;
}

struct ParsedRuns {
  std::vector<RowCase> cases;
  std::vector<std::string> skipped;
};

Expected<ParsedRuns> parse_runs(const std::vector<CsvTable>& tables, const std::vector<std::string>& wheres,
                                ClusterLoader load) {
  ParsedRuns out;
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
      auto c = parse_case(r, load);
      if (!c.ok()) {  // the message names the file, line, row id and column
        out.skipped.push_back(c.error());
      } else if (!c->p.skip_reason.empty()) {
        out.skipped.push_back("row_id " + c->p.row_id + " (" + where + "): " + c->p.skip_reason);
      } else {
        out.cases.push_back(std::move(*c));
      }
    }
  }
  return out;
}

StackParams params_for(const std::map<std::string, StackParams>& m, const RowCase& c) {
  auto it = m.find(c.profile.name);
  return it == m.end() ? c.profile.params : it->second;
}

// Fits one profile's parameters on `rows` (indices into cases), each priced
// on the layout `layouts[i]` found with the starting parameters: coordinate
// descent by golden-section search on each parameter in turn, minimising the
// mean |log(predicted / reported)|.
StackParams fit_profile(const std::vector<RowCase>& cases, const std::vector<size_t>& rows,
                        const std::vector<ParallelLayout>& layouts, StackParams start) {
  if (rows.empty()) return start;
  auto loss = [&](const StackParams& q) {
    double sum = 0;
    for (size_t i : rows) {
      const RowPrediction p = price_case(cases[i], q, &layouts[i]);
      sum += std::fabs(std::log(p.predicted / p.reported));
    }
    return sum / static_cast<double>(rows.size());
  };
  if (start.overlap_loss < 0) start.overlap_loss = cases[rows.front()].cl.eff.overlap_loss;
  struct Axis {
    double StackParams::*field;
    double lo, hi;
    bool log;
  };
  const Axis axes[] = {{&StackParams::gemm_scale, 0.5, 1.6, false},
                       {&StackParams::overhead_scale, 0.1, 10, true},
                       {&StackParams::overlap_loss, 0, 1, false},
                       {&StackParams::link_scale, 0.05, 1.4, true}};
  StackParams best = start;
  double best_loss = loss(best);
  for (int round = 0; round < 2; ++round) {
    for (const Axis& ax : axes) {
      const double phi = 0.5 * (std::sqrt(5.0) - 1);
      auto to = [&](double u) { return ax.log ? std::exp(u) : u; };
      double a = ax.log ? std::log(ax.lo) : ax.lo, b = ax.log ? std::log(ax.hi) : ax.hi;
      auto at = [&](double u) {
        StackParams q = best;
        q.*ax.field = to(u);
        return loss(q);
      };
      double x1 = b - phi * (b - a), x2 = a + phi * (b - a), f1 = at(x1), f2 = at(x2);
      for (int it = 0; it < 14; ++it) {
        if (f1 < f2) {
          b = x2, x2 = x1, f2 = f1, x1 = b - phi * (b - a), f1 = at(x1);
        } else {
          a = x1, x1 = x2, f1 = f2, x2 = a + phi * (b - a), f2 = at(x2);
        }
      }
      const double u = f1 < f2 ? x1 : x2, f = std::min(f1, f2);
      if (f < best_loss) {
        best_loss = f;
        best.*ax.field = to(u);
      }
    }
  }
  return best;
}

// Fits every profile present among `rows`; others keep `base`.
std::map<std::string, StackParams> fit_profiles(const std::vector<RowCase>& cases, const std::vector<size_t>& rows,
                                                const std::vector<ParallelLayout>& layouts,
                                                std::map<std::string, StackParams> base,
                                                const std::vector<std::string>& only = {}) {
  std::map<std::string, std::vector<size_t>> by;
  for (size_t i : rows) by[cases[i].profile.name].push_back(i);
  for (const auto& [name, idx] : by) {
    if (!only.empty() && std::find(only.begin(), only.end(), name) == only.end()) continue;
    auto it = base.find(name);
    base[name] = fit_profile(cases, idx, layouts, it == base.end() ? cases[idx.front()].profile.params : it->second);
  }
  return base;
}

// The layouts each row is priced on with parameters `m` (searched when the row leaves settings open).
std::vector<ParallelLayout> start_layouts(const std::vector<RowCase>& cases, const std::map<std::string, StackParams>& m) {
  std::vector<ParallelLayout> out;
  for (const RowCase& c : cases) out.push_back(price_case(c, params_for(m, c)).layout);
  return out;
}

double median_of(std::vector<double> v) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

}  // namespace

void summarise(ValidationReport* rep) {
  std::vector<double> all;
  std::vector<std::string> order;
  std::map<std::string, std::vector<double>> by;
  for (const RowPrediction& p : rep->rows) {
    const double e = std::fabs(p.rel_error);
    all.push_back(e);
    if (!by.count(p.source)) order.push_back(p.source);
    by[p.source].push_back(e);
  }
  rep->median_abs_error = median_of(all);
  rep->max_abs_error = all.empty() ? 0 : *std::max_element(all.begin(), all.end());
  rep->by_source.clear();
  for (const std::string& s : order) {
    const auto& v = by[s];
    rep->by_source.push_back({s, static_cast<int>(v.size()), median_of(v), *std::max_element(v.begin(), v.end())});
  }
}

namespace {

// A validation that scored no row is a failure, never a median of nothing.
Status nothing_scored(const std::vector<std::string>& wheres, const std::vector<std::string>& skipped) {
  std::string files;
  for (const std::string& w : wheres) files += (files.empty() ? "" : ", ") + w;
  return Status::error(fmt::format("{}: no row could be scored ({} skipped{}{})", files, skipped.size(),
                                   skipped.empty() ? "" : "; the first: ", skipped.empty() ? "" : skipped.front()));
}

}  // namespace

Expected<ValidationReport> validate_runs(const std::vector<CsvTable>& tables, const std::vector<std::string>& wheres,
                                         ClusterLoader load, const ValidateOptions& opt) {
  auto parsed = parse_runs(tables, wheres, load);
  if (!parsed.ok()) return parsed.status();
  const std::vector<RowCase>& cases = parsed->cases;
  ValidationReport rep;
  rep.skipped = parsed->skipped;
  std::map<std::string, StackParams> params = opt.params;
  if (opt.fit) {
    // From neutral parameters (the presets unchanged), so a fit depends on the rows only.
    std::map<std::string, StackParams> neutral;
    for (const RowCase& c : cases) neutral[c.profile.name] = StackParams{};
    std::vector<size_t> all(cases.size());
    for (size_t i = 0; i < all.size(); ++i) all[i] = i;
    params = fit_profiles(cases, all, start_layouts(cases, neutral), neutral);
  }
  for (const RowCase& c : cases) {
    const StackParams q = params_for(params, c);
    if (!params.count(c.profile.name)) params[c.profile.name] = q;
    RowPrediction p = price_case(c, q);
    if (!p.skip_reason.empty()) {
      rep.skipped.push_back("row_id " + p.row_id + ": " + p.skip_reason);
      continue;
    }
    rep.rows.push_back(std::move(p));
  }
  rep.params = params;
  summarise(&rep);
  if (rep.rows.empty()) return nothing_scored(wheres, rep.skipped);
  return rep;
}

Expected<ValidationReport> validate_runs(const CsvTable& table, const std::string& where, ClusterLoader load) {
  return validate_runs(std::vector<CsvTable>{table}, std::vector<std::string>{where}, load);
}

Expected<CrossValidation> cross_validate_by_source(const std::vector<CsvTable>& tables,
                                                   const std::vector<std::string>& wheres, ClusterLoader load) {
  auto parsed = parse_runs(tables, wheres, load);
  if (!parsed.ok()) return parsed.status();
  const std::vector<RowCase>& cases = parsed->cases;
  ValidateOptions fit;
  fit.fit = true;
  CrossValidation cv;
  auto in = validate_runs(tables, wheres, load, fit);
  if (!in.ok()) return in.status();
  cv.in_sample = std::move(*in);
  std::map<std::string, StackParams> neutral;
  for (const RowCase& c : cases) neutral[c.profile.name] = StackParams{};
  const std::vector<ParallelLayout> layouts = start_layouts(cases, neutral);  // as the in-sample fit started
  std::vector<std::string> sources;
  for (const RowCase& c : cases) {
    if (std::find(sources.begin(), sources.end(), c.p.source) == sources.end()) sources.push_back(c.p.source);
  }
  cv.held_out.skipped = parsed->skipped;
  std::vector<RowPrediction> held(cases.size());
  std::vector<bool> priced(cases.size(), false);
  for (const std::string& src : sources) {
    std::vector<size_t> train;
    std::vector<std::string> touched;  // profiles of the held-out source: only their fits change
    for (size_t i = 0; i < cases.size(); ++i) {
      if (cases[i].p.source != src) train.push_back(i);
      else if (std::find(touched.begin(), touched.end(), cases[i].profile.name) == touched.end()) {
        touched.push_back(cases[i].profile.name);
      }
    }
    // The held-out source's profiles are refitted from neutral parameters
    // (the preset unchanged); one with no other source keeps them.
    std::map<std::string, StackParams> base = cv.in_sample.params;
    for (const std::string& t : touched) base[t] = StackParams{};
    const auto params = fit_profiles(cases, train, layouts, base, touched);
    for (size_t i = 0; i < cases.size(); ++i) {
      if (cases[i].p.source != src) continue;
      held[i] = price_case(cases[i], params_for(params, cases[i]));
      priced[i] = true;
    }
  }
  for (size_t i = 0; i < cases.size(); ++i) {
    if (!priced[i]) continue;
    if (!held[i].skip_reason.empty()) {
      cv.held_out.skipped.push_back("row_id " + held[i].row_id + ": " + held[i].skip_reason);
    } else {
      cv.held_out.rows.push_back(std::move(held[i]));
    }
  }
  summarise(&cv.held_out);
  if (cv.held_out.rows.empty()) return nothing_scored(wheres, cv.held_out.skipped);
  return cv;
}

}  // namespace tera
