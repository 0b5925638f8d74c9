// The published-runs row vocabulary (published_row.h): each column read,
// checked and named in messages by file, line and row id.
#include "plan/published_row.h"

#include "core/strings.h"

#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <charconv>
#include <cmath>

namespace tera {

namespace {

bool contains(const std::string& hay, const char* needle) { return contains_ignore_case(hay, needle); }

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

// Which preset a row's hardware runs on; "" with the reason when none does,
// and in *note what the row's hardware differs from the preset in.
std::string cluster_for(const std::string& gpu_type, std::string* why, std::string* note) {
  auto has = [&](const char* s) { return contains_ignore_case(gpu_type, s); };
  // GH200's GPU is an H100 die at full power: H200's tensor peak, with 144
  // GB of HBM3e (H200's rate) or 96 GB of HBM3 (4 TB/s: load_cluster sets
  // both); its node (Grace CPUs, 4 GPUs or an NVLink switch domain) is not
  // a DGX one, so its links are the preset's estimate.
  if (has("GH200")) {
    *note = "GH200 priced as an H200 in a DGX node (same tensor peak; its node's links differ)";
    return "dgx-h200";
  }
  // Boards that share a preset GPU's name but not its power and clock:
  // priced as the SXM part, they would be silently fast.
  const bool h100_nvl = has("H100") && contains_word_ignore_case(gpu_type, "NVL") && !has("SXM");
  if (contains_word_ignore_case(gpu_type, "PCIe") || h100_nvl) {
    *why = "a PCIe or NVL board runs at a lower power and clock than the SXM part the presets describe";
    return "";
  }
  if (has("A100")) return "selene";
  // The 500 W HBM2e H100 (torchtitan's Grand Teton hosts) is its own part.
  if (has("H100") && has("HBM2e")) return "h100-hbm2e";
  if (has("H100")) return "dgx-h100";
  if (has("H200")) return "dgx-h200";
  if (has("MI250X")) return "frontier";
  *why = "no preset for this GPU";
  return "";
}

#define TERA_ASSIGN_OR_RETURN(lhs, expr) \
  auto lhs##_e = (expr);                 \
  if (!lhs##_e.ok()) return lhs##_e.status(); \
  auto lhs = *lhs##_e


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
  // The gated-MLP family is Llama's architecture: rotary positions (no
  // learned position table, which at a 262k context would be 4B parameters
  // of a 16k-wide model), RMSNorm, no biases; and it unties its input and
  // output embeddings.
  if (m.mlp == MlpKind::gated) m.arch = Arch::llama;
  if (untied_by_family(m)) {
    w->untied_embeddings = true;
    p->flags.push_back("untied embeddings (Llama family)");
  }
  if (Status s = validate_model_config(m); !s) return Status::error(r.where + ": " + s.message());
  const std::string prec = ascii_lower(r.text("precision"));
  // A 16-bit row runs its stack's mixed precision: the stack profiles of
  // every framework in the files keep every activation in 16 bits.
  w->precision = contains(prec, "fp32") && !contains(prec, "mixed") ? Precision::fp32 : Precision::bf16;
  w->fp8_gemms = contains(prec, "fp8");  // float8 linear layers; the rest bf16 with fp32 masters
  // The scaling recipe, where the row names it (its precision, framework or
  // notes: "float8 rowwise"); tensorwise, torchao's default, otherwise.
  if (w->fp8_gemms) {
    const std::string recipe = r.text("precision") + " " + r.text("framework") + " " + r.text("notes");
    w->fp8_rowwise = contains(recipe, "rowwise");
    if (w->fp8_rowwise) p->flags.push_back("fp8 rowwise scales");
  }
  if (!contains(prec, "fp16") && !contains(prec, "bf16") && !contains(prec, "mixed") && !contains(prec, "fp32") &&
      !w->fp8_gemms) {
    p->flags.push_back("precision=bf16 assumed");
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
  const std::string gpu = r.text("gpu_type");
  if (contains(gpu, "40GB")) c->cl.gpu.memory_bytes = 40 * kGiB;
  if (contains_ignore_case(gpu, "GH200") && (contains(gpu, "96GB") || contains(gpu, "96 GB"))) {
    c->cl.gpu.memory_bytes = 96 * kGiB;  // the first GH200: 96 GB of HBM3 at 4 TB/s
    c->cl.gpu.hbm_bw = 4.0e12;
  }
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
  const std::string zero = ascii_lower(r.text("zero_fsdp_distopt"));
  // HSDP / PyTorch's HYBRID_SHARD: FSDP (ZeRO-3) in hybrid groups.
  const bool hsdp = contains(zero, "hsdp") || contains(zero, "hybrid_shard") || contains(zero, "hybrid shard");
  if (contains(zero, "zero-3") || contains(zero, "fsdp") || hsdp) space.zero = 3;
  else if (contains(zero, "zero-2")) space.zero = 2;
  else if (contains(zero, "zero-1") || contains(zero, "distributed optimizer") || contains(zero, "distopt")) space.zero = 1;
  else if (zero.rfind("none", 0) == 0 && zero != "none stated") space.zero = 0;
  // FSDP's reshard_after_forward where the column says it: the word after
  // the key ("reshard_after_forward=False", "... off", torchtitan's
  // "fsdp_reshard_after_forward = never"; "=True", "on", "always").
  if (const size_t at = zero.find("reshard_after_forward"); at != std::string::npos) {
    size_t from = zero.find_first_not_of(" =:", at + std::string_view("reshard_after_forward").size());
    std::string said;
    while (from < zero.size() && std::isalnum(static_cast<unsigned char>(zero[from]))) said += zero[from++];
    if (said == "false" || said == "0" || said == "off" || said == "no" || said == "never") {
      space.reshard_after_forward = false;
      p.flags.push_back("reshard_after_forward off");
    } else if (said == "true" || said == "1" || said == "on" || said == "yes" || said == "always") {
      space.reshard_after_forward = true;
    }
  }
  // Unsaid: on (FSDP's default) without pipeline parallelism; with it, a
  // stage keeps its gathered parameters for the step, as PyTorch's pipeline
  // schedules run FSDP (torchtitan's default) and Llama 3's 16k-GPU runs
  // did (DeepSpeed cannot pipeline ZeRO-3 at all): re-gathering them for
  // every micro-batch is a choice a run would state.
  // (Where the search chooses pp, the search's own default, on, holds.)
  if (space.zero == 3 && !space.reshard_after_forward.has_value() && space.pp.value_or(1) > 1) {
    space.reshard_after_forward = false;
    p.flags.push_back("reshard_after_forward off (FSDP with a pipeline: parameters gathered once a step)");
  }
  // Hybrid sharding: a stated replica count (torchtitan's dp_replicate) or
  // HSDP / PyTorch's HYBRID_SHARD alone (one node's worth of ranks per group).
  const std::string_view key = "dp_replicate";
  if (const size_t rep = zero.find(key); rep != std::string::npos) {
    const size_t at = zero.find_first_of("0123456789", rep + key.size());
    int n = 0;
    if (at != std::string::npos && at <= rep + key.size() + 4) std::from_chars(zero.data() + at, zero.data() + zero.size(), n);
    if (n > 1) {
      space.zero_replicas = n;
      p.flags.push_back(fmt::format("hybrid sharding: {} replicas", n));
    }
  }
  if (!space.zero_replicas && hsdp) {
    space.sharding = SearchSpace::Sharding::node;
    p.flags.push_back("hybrid sharding: one node's ranks per group assumed");
  }
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
  const StackProfile& prof = c->profile;
  if (!space.micro_batch && prof.microbatches_default_to_stages && space.pp && *space.pp > 1 && space.dp && *space.dp > 0) {
    // The stack's n_microbatches = pp: each data-parallel rank's share of the batch over pp micro-batches.
    const int64_t share = c->w.global_batch / *space.dp;
    if (c->w.global_batch % *space.dp == 0 && share % *space.pp == 0) {
      space.micro_batch = static_cast<int>(share / *space.pp);
      p.flags.push_back(fmt::format("micro_batch={} (the stack's default: micro-batches = pp)", *space.micro_batch));
    }
  }
  if (!space.micro_batch) p.flags.push_back("micro_batch chosen");
  const std::string sp = ascii_lower(r.text("sequence_parallel"));
  if (sp == "yes" || sp == "true") space.sequence_parallel = true;
  else if (sp == "no" || sp == "false") space.sequence_parallel = false;
  else if (c->profile.sequence_parallel == false) {
    space.sequence_parallel = false;
    p.flags.push_back("sp=0 (the stack has no sequence parallelism)");
  } else p.flags.push_back("sequence_parallel chosen");
  // The pipeline schedule the framework cell names ("PP schedule 1F1B",
  // "Interleaved 1F1B"), and the stack's defaults where the row is silent.
  const std::string fw = ascii_lower(r.text("framework"));
  const bool interleaved = contains(fw, "interleaved");
  if (space.pp && *space.pp == 1) {
    space.vpp = 1;
  } else if (r.has("vpp_chunks")) {
    TERA_RETURN_IF_ERROR(fixed_int(r, "vpp_chunks", &space.vpp));
  } else if (space.pp && interleaved && prof.interleaved_vpp_default > 0) {
    space.vpp = prof.interleaved_vpp_default;
    p.flags.push_back(fmt::format("vpp={} (the stack's interleaved default)", *space.vpp));
  } else if (space.pp && !interleaved && (contains(fw, "1f1b") || contains(fw, "gpipe"))) {
    space.vpp = 1;
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
  // The run's peak memory per GPU, where the source gives it (an auxiliary
  // outcome: the memory model's check).
  if (r.has("reported_peak_memory_gib")) {
    TERA_ASSIGN_OR_RETURN(gib, r.number("reported_peak_memory_gib"));
    if (!(gib > 0) || !std::isfinite(gib)) {
      return Status::error(fmt::format("{}: reported_peak_memory_gib = {} must be a positive number of GiB", r.where, gib));
    }
    p->reported_memory_gib = gib;
  }
  return ok_status();
}

// The FLOP convention of the reported figure from util_metric, else from the FLOPs that time x TFLOP/s imply.
Status parse_convention(const RowReader& r, int64_t gpus, double f_model, double f_eq3, RowPrediction* p) {
  const std::string um = r.text("util_metric");
  // The text may name a convention per column ("MFU ...; TFLOP/s are
  // Megatron-style hardware FLOPs"): the TFLOP/s figure's own comes first.
  const bool tflops_hardware = contains(um, "TFLOP/s") && (contains(um, "hardware") || contains(um, "HFU"));
  if (p->metric == MetricKind::tflops_per_gpu && tflops_hardware) {
    p->convention = FlopConvention::megatron_eq3;
  } else if (contains(um, "MFU")) {
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
  const std::string rc = ascii_lower(r.text("activation_recompute"));
  if (rc.rfind("full", 0) == 0) space->recompute = Recompute::full;
  else if (rc.rfind("selective", 0) == 0) {
    space->recompute = Recompute::selective;
    // torchtitan's layer-level SAC (every n-th block checkpointed whole) is
    // not a setting tera has: priced as the stack's selective, said so.
    if (rc.rfind("selective layer", 0) == 0) p->flags.push_back("layer-level SAC priced as the stack's selective");
  }
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
    l.reshard_after_forward = l.zero < 3 || space.reshard_after_forward.value_or(true);
    l.schedule = l.vpp > 1 ? ScheduleKind::interleaved : ScheduleKind::one_f_one_b;
    const std::vector<int> shards = shard_choices(l, rc_case.cl, space);
    if (shards.empty()) {
      p.skip_reason = fmt::format("the row's hybrid sharding does not fit its layout ({} ranks hold the same "
                                  "parameters, zero = {})", l.dp_cp(), l.zero);
      return;
    }
    l.shard = shards.front();
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
  std::string why, note;
  const std::string preset = cluster_for(r.text("gpu_type"), &why, &note);
  if (!note.empty()) p.flags.push_back(note);
  if (preset.empty()) {
    p.skip_reason = fmt::format("gpu_type '{}' has no cluster preset: {} (presets: A100 SXM, H100 SXM, H100 HBM2e "
                                "500 W, H200 SXM, MI250X)",
                                r.text("gpu_type"), why);
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

}  // namespace

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

}  // namespace tera
