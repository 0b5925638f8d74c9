// Text and JSON renderings of planner results (see report.h). Sizes print in
// GiB, times in seconds.
#include "plan/report.h"

#include <fmt/format.h>

#include "partition/parallel_layout_json.h"

namespace tera {

namespace {

std::string gib(double bytes) { return fmt::format("{:.1f}", bytes / kGiB); }

std::string short_layout(const ParallelLayout& l) {
  return fmt::format("tp={} pp={} dp={} {}vpp={} mb={} zero={} sp={} rc={}", l.tp, l.pp, l.dp,
                     l.cp > 1 ? fmt::format("cp={} ", l.cp) : "", l.vpp, l.micro_batch, l.zero,
                     l.sequence_parallel ? 1 : 0, recompute_name(l.recompute));
}

}  // namespace

namespace {

// The plan's classes by key ("zero_staging"), then the allowances.
const char* class_key(MemoryClass c) {
  switch (c) {
    case MemoryClass::parameters: return "parameters";
    case MemoryClass::gradients: return "gradients";
    case MemoryClass::optimizer: return "optimizer";
    case MemoryClass::zero_staging: return "zero_staging";
    case MemoryClass::comm_buckets: return "comm_buckets";
    case MemoryClass::zero_gather: return "zero_gather";
    case MemoryClass::activations: return "activations";
    case MemoryClass::workspace: return "workspace";
  }
  return "?";
}

nlohmann::json memory_json(const MemoryBreakdown& m) {
  nlohmann::json j;
  for (MemoryClass c : kAllMemoryClasses) j[class_key(c)] = m.plan[c];
  j["allocator"] = m.allocator;
  j["reserved"] = m.reserved;
  j["stage"] = m.stage;
  return j;
}

}  // namespace

nlohmann::json evaluation_json(const Evaluation& e) {
  const MemoryBreakdown& m = e.memory;
  // The layout's keys (partition/parallel_layout_json.h) beside the predictions.
  nlohmann::json j = layout_to_json(e.layout);
  j.update({
      {"memory_bytes", m.total()},
      {"memory", memory_json(m)},
      {"fits", e.fits},
      {"step_time_s", e.step_time_s},
      {"tokens_per_s", e.tokens_per_s},
      {"tflops_per_gpu", e.tflops_per_gpu},
      {"mfu", e.mfu},
      {"hfu", e.hfu},
      {"bubble", e.bubble},
  });
  return j;
}

std::string evaluations_table(const std::vector<Evaluation>& best, const Cluster& cl) {
  std::string s = fmt::format("{:>4}  {:>3} {:>3} {:>4} {:>2} {:>3} {:>3} {:>4} {:>2} {:>9}  {:>9}  {:>9}  {:>10}  {:>7}  {:>5}  {:>6}\n",
                              "rank", "tp", "pp", "dp", "cp", "vpp", "mb", "zero", "sp", "recompute", "mem(GiB)", "step(s)",
                              "tokens/s", "TFLOP/s", "MFU", "bubble");
  bool hybrid = false;
  for (size_t i = 0; i < best.size(); ++i) {
    const Evaluation& e = best[i];
    const ParallelLayout& l = e.layout;
    // A hybrid-sharded layout's ZeRO stage with its shard group: "3/8".
    const std::string zero = l.hybrid_shard() ? fmt::format("{}/{}", l.zero, l.shard) : std::to_string(l.zero);
    hybrid = hybrid || l.hybrid_shard();
    s += fmt::format("{:>4}  {:>3} {:>3} {:>4} {:>2} {:>3} {:>3} {:>4} {:>2} {:>9}  {:>9}  {:>9.3f}  {:>10.0f}  {:>7.1f}  {:>4.1f}%  {:>5.1f}%\n",
                     i + 1, l.tp, l.pp, l.dp, l.cp, l.vpp, l.micro_batch, zero, l.sequence_parallel ? 1 : 0,
                     recompute_name(l.recompute), gib(e.memory.total()), e.step_time_s, e.tokens_per_s,
                     e.tflops_per_gpu, 100 * e.mfu, 100 * e.bubble);
  }
  if (hybrid) s += "zero Z/N: ZeRO-Z sharded over groups of N data-parallel ranks, replicated across the groups (shard=N)\n";
  s += fmt::format("\nmemory per GPU (GiB, fullest stage) of {} GiB: tera's buffers (parameters + gradients + optimizer + "
                   "ZeRO staging, buckets and gather + activations + workspace) + allocator + reserved\n",
                   gib(cl.gpu.memory_bytes));
  for (size_t i = 0; i < best.size(); ++i) {
    const MemoryBreakdown& m = best[i].memory;
    const MemoryReport& p = m.plan;
    using MC = MemoryClass;
    s += fmt::format("{:>4}  stage {:>3}: {} + {} + {} + {} + {} + {} = {} buffers + {} + {} = {}\n", i + 1, m.stage,
                     gib(p[MC::parameters]), gib(p[MC::gradients]), gib(p[MC::optimizer]),
                     gib(p[MC::zero_staging] + p[MC::comm_buckets] + p[MC::zero_gather]), gib(p[MC::activations]),
                     gib(p[MC::workspace]), gib(m.model()), gib(m.allocator), gib(m.reserved), gib(m.total()));
  }
  return s;
}

std::string memory_text(const MemoryBreakdown& m, const Cluster& cl) {
  std::string s = fmt::format("memory per GPU (stage {}, the fullest): {} GiB of {} GiB\n", m.stage, gib(m.total()),
                              gib(cl.gpu.memory_bytes));
  s += fmt::format("  tera's buffers (the runtime's memory plan) {} GiB:\n", gib(m.model()));
  for (MemoryClass c : kAllMemoryClasses) {
    if (m.plan[c] > 0) s += fmt::format("    {:<24} {:>8} GiB\n", memory_class_name(c), gib(m.plan[c]));
  }
  if (m.fsdp_unsharded > 0) {
    s += fmt::format("    {:<24} {:>8} GiB  (reshard=0: the stage's blocks held gathered, pipelined gradients "
                     "unsharded)\n",
                     "FSDP unsharded", gib(m.fsdp_unsharded));
  }
  s += fmt::format("  allowances of a GPU stack:\n");
  s += fmt::format("    {:<24} {:>8} GiB  ({:.0f}% of the buffers)\n", "allocator fragmentation", gib(m.allocator),
                   100 * cl.memory.fragmentation);
  s += fmt::format("    {:<24} {:>8} GiB  (CUDA/HIP context, NCCL/RCCL, library workspaces)\n", "framework + NCCL",
                   gib(m.reserved));
  return s;
}

std::string explain_text(const Evaluation& e, const Workload& w, const Cluster& cl, const Schedule& sch) {
  const ParallelLayout& l = e.layout;
  const double T = e.step_time_s;
  std::string s = fmt::format("layout {}\n  schedule {} with {} micro-batches of {} sequences per pipeline\n",
                              layout_string(l), schedule_kind_name(l.schedule), micro_batches(l, w), l.micro_batch);
  s += fmt::format("fits: {}\n", e.fits ? "yes" : "NO");
  s += memory_text(e.memory, cl);
  s += fmt::format("step time {:.4f} s; breakdown on stage {} (the last to finish):\n", T, e.sim.critical_stage);
  s += breakdown_text(step_breakdown(e.sim), cl.stack.flash_attention);
  s += fmt::format("throughput: {:.0f} tokens/s, {:.1f} model TFLOP/s per GPU, MFU {:.1f}%, HFU {:.1f}%\n",
                   e.tokens_per_s, e.tflops_per_gpu, 100 * e.mfu, 100 * e.hfu);
  std::string first = sch.to_string(e.sim.critical_stage);
  if (first.size() > 400) first = first.substr(0, first.rfind(',', 400)) + ",...";
  s += fmt::format("instructions of stage {}: {}\n", e.sim.critical_stage, first);
  return s;
}

std::string validation_table(const ValidationReport& rep) {
  std::string s = fmt::format("{:>4}  {:<22} {:>5}  {:<9} {:<46} {:<17} {:>9} {:>9} {:>7}  {}\n", "row", "model", "gpus",
                              "cluster", "layout priced", "metric", "predicted", "reported", "error", "planner choices / notes");
  for (const auto& r : rep.rows) {
    std::string notes;
    for (const auto& f : r.flags) notes += (notes.empty() ? "" : "; ") + f;
    s += fmt::format("{:>4}  {:<22} {:>5}  {:<9} {:<46} {:<17} {:>9.3f} {:>9.3f} {:>+6.1f}%  {}\n", r.row_id,
                     r.model.substr(0, 22), r.gpus, r.cluster, short_layout(r.layout), metric_name(r.metric),
                     r.predicted, r.reported, 100 * r.rel_error, notes);
  }
  for (const auto& sk : rep.skipped) s += "  skipped " + sk + "\n";
  s += '\n';
  s += source_table(rep);
  s += '\n';
  s += params_table(rep.params);
  s += fmt::format("\n{} rows: median |error| {:.2f}%, max |error| {:.2f}%\n", rep.rows.size(),
                   100 * rep.median_abs_error, 100 * rep.max_abs_error);
  s += '\n';
  s += term_table(rep);
  s += memory_table(rep);
  return s;
}

std::string memory_table(const ValidationReport& rep) {
  if (rep.memory.rows == 0) return "";
  std::string s = fmt::format(
      "\nmemory per GPU against the reported peaks (the fullest stage, with the allocator and framework allowances):\n"
      "{:>4}  {:<22} {:<46} {:>9} {:>9} {:>7}\n",
      "row", "model", "layout priced", "predicted", "reported", "error");
  for (const auto& r : rep.rows) {
    if (r.reported_memory_gib <= 0) continue;
    s += fmt::format("{:>4}  {:<22} {:<46} {:>7.1f}Gi {:>7.1f}Gi {:>+6.1f}%\n", r.row_id, r.model.substr(0, 22),
                     short_layout(r.layout), r.predicted_memory_gib, r.reported_memory_gib, 100 * memory_rel_error(r));
  }
  s += fmt::format("{} rows: median |error| {:.1f}%, max |error| {:.1f}%, median predicted/reported {:.2f}\n",
                   rep.memory.rows, 100 * rep.memory.median_abs_error, 100 * rep.memory.max_abs_error,
                   rep.memory.median_ratio);
  return s;
}

namespace {

std::string short_source(const std::string& s) { return s.size() > 64 ? s.substr(0, 61) + "..." : s; }

}  // namespace

std::string source_table(const ValidationReport& rep) {
  std::string s = fmt::format("{:<64} {:>4} {:>9} {:>9}\n", "source", "rows", "median", "max");
  for (const SourceStats& x : rep.by_source) {
    s += fmt::format("{:<64} {:>4} {:>8.2f}% {:>8.2f}%\n", short_source(x.source), x.rows, 100 * x.median_abs_error,
                     100 * x.max_abs_error);
  }
  return s;
}

std::string term_table(const ValidationReport& rep) {
  std::string s = fmt::format("misses by dominant term (the largest term of the predicted step besides GEMM, attention and "
                              "memory-bound compute; compute: none reaches {:.0f}% of the step):\n",
                              100 * kDominantShare);
  s += fmt::format("{:<20} {:>4} {:>9} {:>9}\n", "term", "rows", "median", "max");
  for (const TermStats& x : rep.by_term) {
    s += fmt::format("{:<20} {:>4} {:>8.2f}% {:>8.2f}%\n", x.term, x.rows, 100 * x.median_abs_error, 100 * x.max_abs_error);
  }
  return s;
}

std::string params_table(const std::map<std::string, StackParams>& params) {
  std::string s = fmt::format("{:<20} {:>10} {:>14} {:>12} {:>10} {:>11} {:>9}\n", "stack profile", "gemm_scale",
                              "overhead_scale", "overlap_loss", "link_scale", "fp8_rowwise", "fp8");
  for (const auto& [name, q] : params) {
    s += fmt::format("{:<20} {:>10.3f} {:>14.3f} {:>12} {:>10.3f} {:>11.3f} {:>9.3f}\n", name, q.gemm_scale,
                     q.overhead_scale, q.overlap_loss < 0 ? std::string("preset") : fmt::format("{:.3f}", q.overlap_loss),
                     q.link_scale, q.fp8_rowwise_scale, q.fp8_scale);
  }
  return s;
}

std::string cross_validation_table(const CrossValidation& cv) {
  std::string s = "held-out rows (each predicted by profiles fitted without its source):\n";
  ValidationReport h = cv.held_out;
  h.params.clear();
  std::string rows = validation_table(h);
  rows = rows.substr(0, rows.find("\nsource "));  // the rows and skips; the summary follows
  s += rows + "\n\n";
  s += fmt::format("{:<64} {:>4} {:>10} {:>10} {:>10} {:>10}\n", "source", "rows", "in median", "in max",
                   "held median", "held max");
  for (const SourceStats& x : cv.held_out.by_source) {
    SourceStats in;
    for (const SourceStats& y : cv.in_sample.by_source) {
      if (y.source == x.source) in = y;
    }
    s += fmt::format("{:<64} {:>4} {:>9.2f}% {:>9.2f}% {:>9.2f}% {:>9.2f}%\n", short_source(x.source), x.rows,
                     100 * in.median_abs_error, 100 * in.max_abs_error, 100 * x.median_abs_error,
                     100 * x.max_abs_error);
  }
  s += fmt::format("{:<64} {:>4} {:>9.2f}% {:>9.2f}% {:>9.2f}% {:>9.2f}%\n", "all", cv.held_out.rows.size(),
                   100 * cv.in_sample.median_abs_error, 100 * cv.in_sample.max_abs_error,
                   100 * cv.held_out.median_abs_error, 100 * cv.held_out.max_abs_error);
  if (!cv.lone_profiles.empty()) {
    s += "\nheld-out profiles that no other source ran:\n";
    for (const CrossValidation::LoneProfile& l : cv.lone_profiles) {
      s += fmt::format("  {:<64} {}: {}\n", short_source(l.source), l.profile,
                       l.family_rows ? fmt::format("the {} family's fit on {} rows", l.family, l.family_rows)
                                     : std::string("neutral parameters (no other row of its family)"));
    }
  }
  s += "\nprofile parameters fitted on all sources:\n" + params_table(cv.in_sample.params);
  s += "\nheld-out " + term_table(cv.held_out);
  return s;
}

nlohmann::json lone_profiles_json(const CrossValidation& cv) {
  nlohmann::json out = nlohmann::json::array();
  for (const CrossValidation::LoneProfile& l : cv.lone_profiles) {
    out.push_back({{"source", l.source}, {"profile", l.profile}, {"family", l.family}, {"family_rows", l.family_rows}});
  }
  return out;
}

nlohmann::json validation_json(const ValidationReport& rep) {
  nlohmann::json a = nlohmann::json::array();
  for (const auto& r : rep.rows) {
    a.push_back({{"row_id", r.row_id},
                 {"source", r.source},
                 {"profile", r.profile},
                 {"model", r.model},
                 {"cluster", r.cluster},
                 {"gpus", r.gpus},
                 {"metric", metric_name(r.metric)},
                 {"flop_convention", r.convention == FlopConvention::model ? "model" : "megatron_eq3"},
                 {"predicted", r.predicted},
                 {"reported", r.reported},
                 {"rel_error", r.rel_error},
                 {"fits", r.fits},
                 {"predicted_memory_gib", r.predicted_memory_gib},
                 {"layout", layout_to_json(r.layout)},
                 {"flags", r.flags}});
    if (r.reported_memory_gib > 0) a.back()["reported_memory_gib"] = r.reported_memory_gib;
  }
  return a;
}

}  // namespace tera
