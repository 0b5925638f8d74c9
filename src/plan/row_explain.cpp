// One published run explained (row_explain.h).
#include "plan/row_explain.h"

#include <fmt/format.h>

#include <algorithm>
#include <charconv>

#include "plan/row_pricing.h"

namespace tera {

namespace {

// A whole string read as a non-negative integer; false otherwise.
bool read_row_number(const std::string& s, int64_t* v) {
  const auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), *v);
  return !s.empty() && ec == std::errc() && end == s.data() + s.size() && *v >= 0;
}

// The ids as ranges of consecutive numbers, "1-46, 70-72, 201-248" (ids
// that are not numbers listed as they are).
std::string id_ranges(const std::vector<std::string>& ids) {
  std::vector<int64_t> nums;
  std::string out;
  for (const std::string& id : ids) {
    int64_t v = 0;
    if (read_row_number(id, &v)) nums.push_back(v);
    else out += (out.empty() ? "" : ", ") + id;
  }
  std::sort(nums.begin(), nums.end());
  nums.erase(std::unique(nums.begin(), nums.end()), nums.end());
  for (size_t i = 0; i < nums.size();) {
    size_t j = i;
    while (j + 1 < nums.size() && nums[j + 1] == nums[j] + 1) ++j;
    out += (out.empty() ? "" : ", ") + (j == i ? fmt::format("{}", nums[i]) : fmt::format("{}-{}", nums[i], nums[j]));
    i = j + 1;
  }
  return out;
}

}  // namespace

Expected<std::vector<std::string>> select_rows(const std::string& spec, const std::vector<std::string>& ids) {
  const std::string valid = fmt::format("the rows priced are {} (a row number from validate's first column, "
                                        "a range 5-8 or a list 3,7,10-12)", id_ranges(ids));
  std::vector<std::string> out;
  size_t start = 0;
  while (start <= spec.size()) {
    size_t comma = spec.find(',', start);
    if (comma == std::string::npos) comma = spec.size();
    const std::string tok = spec.substr(start, comma - start);
    start = comma + 1;
    const size_t dash = tok.find('-', 1);
    int64_t lo = 0, hi = 0;
    const bool range = dash != std::string::npos;
    if (!(range ? read_row_number(tok.substr(0, dash), &lo) && read_row_number(tok.substr(dash + 1), &hi)
                : read_row_number(tok, &lo))) {
      return Status::error(fmt::format("'{}' is not a row number; {}", tok, valid));
    }
    if (!range) hi = lo;
    if (hi < lo) return Status::error(fmt::format("'{}' is a range the wrong way round; {}", tok, valid));
    const size_t before = out.size();
    for (const std::string& id : ids) {
      int64_t v = 0;
      if (read_row_number(id, &v) && v >= lo && v <= hi &&
          std::find(out.begin(), out.end(), id) == out.end()) {
        out.push_back(id);
      }
    }
    if (out.size() == before) return Status::error(fmt::format("no row {} in these files; {}", tok, valid));
    std::sort(out.begin() + static_cast<std::ptrdiff_t>(before), out.end(), [](const std::string& a, const std::string& b) {
      return std::stoll(a) < std::stoll(b);
    });
  }
  return out;
}

Expected<std::vector<RowExplanation>> explain_rows(const std::vector<CsvTable>& tables,
                                                   const std::vector<std::string>& wheres, ClusterLoader load,
                                                   const ValidateOptions& opt, const std::string& spec) {
  auto parsed = parse_runs(tables, wheres, load);
  if (!parsed.ok()) return parsed.status();
  std::vector<std::string> ids;
  for (const RowCase& c : parsed->cases) ids.push_back(c.p.row_id);
  auto sel = select_rows(spec, ids);
  if (!sel.ok()) {
    // A row the files hold but validate skips: say why instead.
    for (const std::string& sk : parsed->skipped) {
      if (sk.find("row_id " + spec + " ") != std::string::npos || sk.find("(row_id " + spec + ")") != std::string::npos) {
        return Status::error(fmt::format("row {} is not priced: {}", spec, sk));
      }
    }
    return sel.status();
  }
  std::map<std::string, StackParams> params = opt.params;
  if (opt.fit) {  // the parameters validate --fit prices with
    auto rep = validate_runs(tables, wheres, load, opt);
    if (!rep.ok()) return rep.status();
    params = rep->params;
  }
  std::vector<RowExplanation> out;
  for (const std::string& id : *sel) {
    for (const RowCase& c : parsed->cases) {
      if (c.p.row_id != id) continue;
      RowExplanation x;
      x.c = c;
      x.params = params_for(params, c);
      StackProfile prof = c.profile;
      prof.params = x.params;
      x.cl = apply_profile(c.cl, prof);
      x.p = price_case(c, x.params, nullptr, &x.e);
      if (!x.p.skip_reason.empty()) return Status::error(fmt::format("row {} is not priced: {}", id, x.p.skip_reason));
      x.reported_step_s = step_for_metric(c, x.p.reported);
      out.push_back(std::move(x));
    }
  }
  return out;
}

namespace {

std::string workload_line(const Workload& w) {
  const ModelConfig& m = w.model;
  return fmt::format("  workload as priced: {} layers, hidden {}, {} heads ({} key/value), ffn {} ({} MLP), seq {}, "
                     "vocab {}{}; global batch {} sequences, {}{}\n",
                     m.layers, m.hidden, m.heads, m.kv(), m.ffn(), mlp_kind_name(m.mlp), m.seq_len, m.vocab,
                     w.untied_embeddings ? ", untied embeddings" : "", w.global_batch, precision_name(w.precision),
                     w.fp8_gemms ? (w.fp8_rowwise ? " with fp8 GEMMs (rowwise scales)" : " with fp8 GEMMs (tensorwise scales)") : "");
}

std::string setup_lines(const RowExplanation& x) {
  const RowPrediction& p = x.p;
  const StackParams& q = x.params;
  const ParallelLayout& l = p.layout;
  std::string s = fmt::format("row {}: {} on {} GPUs; source: {}\n", p.row_id, p.model, p.gpus, p.source);
  s += workload_line(x.c.w);
  const GpuSpec& g = x.cl.gpu;
  const std::string capped =
      g.power_capped() ? fmt::format(", tensor clock {:.3f} ({:g} of {:g} W)", x.cl.eff.tensor_clock, g.power_limit_w,
                                     g.board_power_w)
                       : std::string();
  const std::string waves = g.sms > 0 ? fmt::format(", GEMM waves of {:g}x{:g} tiles on {} SMs", x.cl.eff.gemm_tile_m,
                                                    x.cl.eff.gemm_tile_n, g.sms)
                                      : std::string();
  s += fmt::format("  cluster {} ({}{}{}), stack profile {}: gemm_scale {:.3f}, overhead_scale {:.3f}, overlap_loss {}, "
                   "link_scale {:.3f}{}\n",
                   p.cluster, g.name, capped, waves, p.profile, q.gemm_scale, q.overhead_scale,
                   q.overlap_loss < 0 ? std::string("preset") : fmt::format("{:.3f}", q.overlap_loss), q.link_scale,
                   !x.c.w.fp8_gemms ? std::string()
                   : x.c.w.fp8_rowwise ? fmt::format(", fp8 {:.3f}, fp8_rowwise {:.3f}", q.fp8_scale, q.fp8_rowwise_scale)
                                       : fmt::format(", fp8 {:.3f}", q.fp8_scale));
  s += fmt::format("  layout priced: {}; {} with {} micro-batches of {} per pipeline; fits: {} ({:.1f} of {:.1f} GiB)\n",
                   layout_string(l), schedule_kind_name(l.schedule), micro_batches(l, x.c.w), l.micro_batch,
                   p.fits ? "yes" : "NO", x.e.memory.total() / kGiB, x.cl.gpu.memory_bytes / kGiB);
  {
    // The memory by class on the fullest stage, in GiB.
    const MemoryBreakdown& m = x.e.memory;
    std::string parts;
    for (MemoryClass c : kAllMemoryClasses) {
      if (m.plan[c] <= 0) continue;
      parts += fmt::format("{}{} {:.1f}", parts.empty() ? "" : ", ", memory_class_name(c), m.plan[c] / kGiB);
    }
    if (m.fsdp_unsharded > 0) parts += fmt::format(", FSDP unsharded {:.1f}", m.fsdp_unsharded / kGiB);
    s += fmt::format("  memory on stage {} (GiB): {}, allowances {:.1f}\n", m.stage, parts,
                     (m.allocator + m.reserved) / kGiB);
  }
  if (p.reported_memory_gib > 0) {
    s += fmt::format("  memory per GPU: predicted {:.1f} GiB, the run's reported peak {:.1f} GiB ({:+.1f}%)\n",
                     p.predicted_memory_gib, p.reported_memory_gib, 100 * memory_rel_error(p));
  }
  std::string notes;
  for (const std::string& f : p.flags) notes += (notes.empty() ? "" : "; ") + f;
  if (!notes.empty()) s += "  planner choices / notes: " + notes + "\n";
  return s;
}

}  // namespace

std::string row_explanation_text(const RowExplanation& x) {
  const RowPrediction& p = x.p;
  const StepBreakdown& b = p.breakdown;
  const double T = b.step_time, R = x.reported_step_s;
  std::string s = setup_lines(x);
  s += fmt::format("predicted step time {:.4f} s; breakdown on stage {} (the last to finish), and the factor each "
                   "term alone would need for the step to take the reported {:.4f} s:\n",
                   T, b.stage, R);
  s += breakdown_text(b, x.cl.stack.flash_attention, R);
  s += fmt::format("dominant term: {}\n", dominant_term(b));
  s += fmt::format("{} ({} FLOPs): predicted {:.3f}, reported {:.3f}, error {:+.1f}%\n", metric_name(p.metric),
                   p.convention == FlopConvention::model ? "model" : "Megatron eq. 3", p.predicted, p.reported,
                   100 * p.rel_error);
  const double conv_flops = p.convention == FlopConvention::model ? x.c.f_model : x.c.f_eq3;
  s += fmt::format("implied by the reported figure: a step of {:.4f} s, {:.3f}x the predicted {:.4f} s ({:+.4f} s)\n", R,
                   R / T, T, R - T);
  s += fmt::format("  model FLOP utilisation (ModelSpec FLOPs over the {:.0f} TFLOP/s peak): run {:.1f}%, predicted {:.1f}%\n",
                   x.e.mfu > 0 ? x.e.tflops_per_gpu / x.e.mfu : 0, 100 * x.e.mfu * T / R, 100 * x.e.mfu);
  s += fmt::format("  TFLOP/s per GPU in the row's convention: run {:.1f}, predicted {:.1f}\n",
                   conv_flops / R / p.gpus / 1e12, conv_flops / T / p.gpus / 1e12);
  return s;
}

}  // namespace tera
