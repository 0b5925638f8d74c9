// `tera plan`: which parallel layout fits and how fast it runs, before a run
// (plan/ does the work). `tera plan validate FILE.csv` predicts published runs.
// Bad input (unknown preset, impossible or contradictory flags, a model that
// fits no layout) is a message naming the flag and the fix, exit code 2.
#include <CLI/CLI.hpp>
#include <fmt/format.h>

#include <memory>

#include "cli/commands.h"
#include "cli/flag_checks.h"
#include "core/file_util.h"
#include "core/format.h"
#include "core/timer.h"
#include "plan/emit.h"
#include "plan/presets.h"
#include "plan/scaling.h"
#include "plan/report.h"
#include "plan/row_explain.h"
#include "plan/stack_profile.h"

namespace tera::cli {

namespace {

struct PlanArgs {
  std::string model, cluster, explain, emit, precision = "bf16", stack;
  int gpus = 0, top = 10;
  int64_t global_batch = 0, seq = 0;
  bool seq_given = false;
  bool json = false;
  // Constraints on the search (0 / "": searched).
  int tp = 0, pp = 0, vpp = 0, mb = 0, zero = -1;
  std::string sp, recompute;
  bool hybrid_shard = false;
  // validate
  std::vector<std::string> csv;
  bool validate_json = false, fit = false, explain_given = false;
  std::string cross_validate, explain_rows;
  double fail_median = 0, fail_max = 0;
};

int bad(const std::string& msg) {
  print_error(msg);
  return kExitBadInput;
}

// `validate --explain ROW`: the selected rows' steps taken apart (plan/row_explain.h).
int run_validate_explain(const PlanArgs& a, const std::vector<CsvTable>& tables) {
  if (!a.cross_validate.empty() || a.validate_json || a.fail_median > 0 || a.fail_max > 0) {
    return bad("validate --explain prints the rows it names as text; drop --cross-validate, --json and "
               "--fail-above-* (or --explain)");
  }
  ValidateOptions vo;
  vo.fit = a.fit;
  auto rows = explain_rows(tables, a.csv, &load_cluster, vo, a.explain_rows);
  if (!rows.ok()) return bad("--explain " + a.explain_rows + ": " + rows.error());
  std::string files;
  for (const std::string& f : a.csv) files += " " + f;
  fmt::print("tera plan validate{} --explain {}\n", files, a.explain_rows);
  for (const RowExplanation& x : *rows) fmt::print("\n{}", row_explanation_text(x));
  return kExitOk;
}

int run_validate(const PlanArgs& a) {
  // A calibration file is a few hundred kB; a device (/dev/zero), FIFO or huge file is refused before reading.
  constexpr uint64_t kMaxCsvBytes = uint64_t{64} << 20;
  std::vector<CsvTable> tables;
  for (const std::string& file : a.csv) {
    auto bytes = read_regular_file(file, "validate: file", kMaxCsvBytes);
    if (!bytes.ok()) return bad(bytes.error());
    auto table = parse_csv(std::string(bytes->begin(), bytes->end()), file);
    if (!table.ok()) return bad(table.error());
    tables.push_back(std::move(*table));
  }
  if (a.explain_given) return run_validate_explain(a, tables);
  if (!a.cross_validate.empty()) {
    if (a.cross_validate != "source") return bad("--cross-validate " + a.cross_validate + ": the unit is 'source'");
    auto cv = cross_validate_by_source(tables, a.csv, &load_cluster);
    if (!cv.ok()) return bad(cv.error());
    if (a.validate_json) {
      fmt::print("{}\n", nlohmann::json{{"in_sample", validation_json(cv->in_sample)},
                                         {"held_out", validation_json(cv->held_out)},
                                         {"lone_profiles", lone_profiles_json(*cv)}}.dump(2));
    } else {
      std::string files;
      for (const std::string& f : a.csv) files += " " + f;
      fmt::print("tera plan validate{} --cross-validate source\n\n{}", files, cross_validation_table(*cv));
    }
    const ValidationReport& h = cv->held_out;
    if ((a.fail_median > 0 && 100 * h.median_abs_error > a.fail_median) ||
        (a.fail_max > 0 && 100 * h.max_abs_error > a.fail_max)) {
      print_error(fmt::format("held-out error above the thresholds: median {:.2f}% (limit {}), max {:.2f}% (limit {})",
                              100 * h.median_abs_error, a.fail_median, 100 * h.max_abs_error, a.fail_max));
      return kExitFailure;
    }
    return kExitOk;
  }
  ValidateOptions vo;
  vo.fit = a.fit;
  auto rep = validate_runs(tables, a.csv, &load_cluster, vo);
  if (!rep.ok()) return bad(rep.error());
  if (a.validate_json) {
    fmt::print("{}\n", validation_json(*rep).dump(2));
  } else {
    std::string files;
    for (const std::string& f : a.csv) files += " " + f;
    fmt::print("tera plan validate{}\n\n{}", files, validation_table(*rep));
  }
  if ((a.fail_median > 0 && 100 * rep->median_abs_error > a.fail_median) ||
      (a.fail_max > 0 && 100 * rep->max_abs_error > a.fail_max)) {
    print_error(fmt::format("validation above the thresholds: median {:.2f}% (limit {}), max {:.2f}% (limit {})",
                            100 * rep->median_abs_error, a.fail_median, 100 * rep->max_abs_error, a.fail_max));
    return kExitFailure;
  }
  return kExitOk;
}

Status fill_space(const PlanArgs& a, SearchSpace* s) {
  if (a.tp) s->tp = a.tp;
  if (a.pp) s->pp = a.pp;
  if (a.vpp) s->vpp = a.vpp;
  if (a.mb) s->micro_batch = a.mb;
  if (a.zero >= 0) s->zero = a.zero;
  if (a.hybrid_shard) s->sharding = SearchSpace::Sharding::also_node;
  if (a.sp == "on") s->sequence_parallel = true;
  if (a.sp == "off") s->sequence_parallel = false;
  if (!a.recompute.empty()) {
    if (a.recompute == "none") s->recompute = Recompute::none;
    else if (a.recompute == "selective") s->recompute = Recompute::selective;
    else if (a.recompute == "full") s->recompute = Recompute::full;
  }
  if (a.tp && a.pp && a.gpus % (a.tp * a.pp) != 0) {
    return Status::error(fmt::format("--tp {} x --pp {} = {} does not divide --gpus {}", a.tp, a.pp, a.tp * a.pp, a.gpus));
  }
  return ok_status();
}

std::string no_fit_message(const SearchResult& r, const Workload& w, const Cluster& cl, int gpus) {
  if (!r.smallest) {
    return fmt::format("no layout is possible for {} GPUs and global batch {}: tp (<= {} per node) must divide heads, "
                       "kv_heads, hidden and ffn; pp must divide gpus/tp and be <= layers; dp = gpus/(tp*pp) must "
                       "divide the global batch (and any --tp/--pp/--vpp/--mb given must fit these)",
                       gpus, w.global_batch, cl.node.gpus);
  }
  const MemoryBreakdown& m = r.smallest_memory;
  return fmt::format("no layout fits in {:.1f} GiB per GPU: the smallest possible needs {:.1f} GiB ({}; {} GiB "
                     "parameters, gradients, optimizer state and ZeRO buffers, {:.1f} GiB activations); use more GPUs, a smaller global "
                     "batch or sequence, or a GPU with more memory",
                     cl.gpu.memory_bytes / (1 << 30), m.total() / (1 << 30), layout_string(*r.smallest),
                     fmt::format("{:.1f}", m.states() / (1 << 30)),
                     static_cast<double>(m.plan[MemoryClass::activations]) / (1 << 30));
}

int run_plan(const PlanArgs& a) {
  if (a.model.empty()) return bad("plan: --model is required (a preset name, e.g. gpt3-175b, or a .toml file)");
  if (a.cluster.empty()) return bad("plan: --cluster is required (a preset name, e.g. selene, or a .toml file)");
  if (a.gpus < 1) return bad("plan: --gpus is required and must be >= 1");
  if (a.global_batch < 1) return bad("plan: --global-batch (sequences per step) is required and must be >= 1");
  if (!a.emit.empty() && a.json) return bad("plan: --emit and --json both choose the output; give one");
  const bool constrained =
      a.tp || a.pp || a.vpp || a.mb || a.zero >= 0 || !a.sp.empty() || !a.recompute.empty() || a.hybrid_shard;
  if (!a.explain.empty() && constrained) {
    return bad("plan: --explain prices the one layout it names; put tp/pp/vpp/mb/zero/shard/sp/recompute in the LAYOUT "
               "string instead of flags");
  }
  auto model = load_model(a.model);
  if (!model.ok()) return bad("--model: " + model.error());
  auto cluster = load_cluster(a.cluster);
  if (!cluster.ok()) return bad("--cluster: " + cluster.error());
  if (!a.stack.empty()) {  // price the layouts as that software stack runs them
    auto prof = stack_profile(a.stack);
    if (!prof.ok()) return bad("--stack: " + prof.error());
    *cluster = apply_profile(*cluster, *prof);
  }
  Workload w;
  w.model = *model;
  if (a.seq_given) w.model.seq_len = a.seq;
  if (Status s = validate_model_config(w.model); !s) return bad(fmt::format("--model {} with --seq {}: {}", a.model, w.model.seq_len, s.message()));
  w.untied_embeddings = untied_by_family(w.model);
  w.global_batch = a.global_batch;
  auto prec = parse_precision(a.precision);
  if (!prec.ok()) return bad("--precision: " + prec.error());
  w.precision = *prec;
  if (auto pk = peak_flops(*cluster, w.precision); !pk.ok()) return bad(pk.error());
  const ModelSpec spec(w.model);
  const Cluster& cl = *cluster;

  if (!a.explain.empty()) {
    auto l = parse_layout(a.explain, a.gpus);
    if (!l.ok()) return bad("--explain: " + l.error());
    if (Status s = check_layout(*l, w, a.gpus); !s) return bad("--explain: " + s.message());
    const Evaluation e = evaluate_layout(spec, *l, w, cl);
    if (a.emit == "tera") {
      auto cfg = emit_tera_config(*l, w, cl);
      if (!cfg.ok()) return bad(cfg.error());
      fmt::print("{}", *cfg);
    } else if (a.emit == "megatron") {
      fmt::print("{}", emit_megatron_args(*l, w, cl));
    }
    else if (a.json) fmt::print("{}\n", evaluation_json(e).dump(2));
    else {
      const Schedule sch = make_schedule(l->schedule, l->pp, static_cast<int>(micro_batches(*l, w)), l->vpp).value();
      fmt::print("{}", explain_text(e, w, cl, sch));
    }
    return kExitOk;
  }

  SearchSpace space;
  if (Status s = fill_space(a, &space); !s) return bad("plan: " + s.message());
  space.tera_runtime = a.emit == "tera";  // only layouts `tera train` runs
  if (space.tera_runtime && a.hybrid_shard) {
    return bad("plan: --hybrid-shard with --emit tera: tera's runtime shards ZeRO's states over the whole data-parallel "
               "group; drop one of them");
  }
  Stopwatch clock;
  const SearchResult r = search_layouts(spec, w, cl, a.gpus, space, a.top);
  const double seconds = clock.seconds();
  if (r.best.empty()) return bad("plan: " + no_fit_message(r, w, cl, a.gpus));
  if (a.emit == "tera") {
    auto cfg = emit_tera_config(r.best.front().layout, w, cl);
    if (!cfg.ok()) return bad(cfg.error());
    fmt::print("{}", *cfg);
  } else if (a.emit == "megatron") {
    fmt::print("{}", emit_megatron_args(r.best.front().layout, w, cl));
  } else if (a.json) {
    nlohmann::json arr = nlohmann::json::array();
    for (const auto& e : r.best) arr.push_back(evaluation_json(e));
    fmt::print("{}\n", arr.dump(2));
  } else {
    const std::string capped = cl.gpu.power_capped() ? fmt::format(", {:g} of {:g} W: tensor clock {:.3f}", cl.gpu.power_limit_w,
                                                                   cl.gpu.board_power_w, cl.eff.tensor_clock)
                                                     : std::string();
    fmt::print("tera plan: {} ({} parameters, seq {}) on {}: {} x {} ({:.0f} GiB{}), global batch {} sequences, {} precision\n",
               a.model, human_count(static_cast<double>(spec.num_params())), w.model.seq_len, cl.name, a.gpus,
               cl.gpu.name, cl.gpu.memory_bytes / (1 << 30), capped, w.global_batch, precision_name(w.precision));
    fmt::print("searched {} layouts ({} fit in memory and were priced, {} simulated) in {:.2f} s\n\n", r.enumerated,
               r.fitting, r.simulated, seconds);
    fmt::print("{}", evaluations_table(r.best, cl));
  }
  return kExitOk;
}

}  // namespace

Command add_plan_command(CLI::App& parent) {
  auto a = std::make_shared<PlanArgs>();
  auto* sub = parent.add_subcommand("plan", "Find the parallel layouts that fit and rank them by predicted step time");
  sub->add_option("--model", a->model, "Model preset name (configs/models) or TOML file");
  sub->add_option("--cluster", a->cluster, "Cluster preset name (configs/clusters) or TOML file");
  sub->add_option("--gpus", a->gpus, "Number of GPUs")->check(int_in(1, kMaxPlanGpus));
  sub->add_option("--global-batch", a->global_batch, "Sequences per optimizer step")->check(int_in(1, kMaxPlanGlobalBatch));
  sub->add_option("--seq", a->seq, "Sequence length (default: the model's)")->check(int_in(1, kMaxPlanSeq));
  sub->add_option("--top", a->top, "How many layouts to list")->capture_default_str()->check(int_in(1, 100000));
  sub->add_flag("--json", a->json, "Print a JSON array, best first");
  sub->add_option("--explain", a->explain, "Break down one layout's step, e.g. tp=8,pp=4,vpp=2,mb=1,zero=1,sp=1,recompute=selective");
  sub->add_option("--emit", a->emit, "Print the best (or --explain) layout as a tera config or Megatron-LM arguments")
      ->check(CLI::IsMember({"tera", "megatron"}));
  sub->add_option("--precision", a->precision, kPrecisionHelp)->capture_default_str();
  sub->add_option("--stack", a->stack,
                  "Software stack profile (tera: this runtime, as `tera train` runs; megatron-lm, megatron-core, "
                  "torchtitan, torchtitan-compile, llm.c, ...; default: the cluster preset's own)");
  sub->add_option("--tp", a->tp, "Fix the tensor-parallel degree")->check(int_in(1, 4096));
  sub->add_option("--pp", a->pp, "Fix the pipeline-parallel degree")->check(int_in(1, 4096));
  sub->add_option("--vpp", a->vpp, "Fix the virtual chunks per stage")->check(int_in(1, 4096));
  sub->add_option("--mb", a->mb, "Fix the micro-batch size")->check(int_in(1, kMaxPlanGlobalBatch));
  sub->add_option("--zero", a->zero, "Fix the ZeRO stage")->check(int_in(0, 3));
  sub->add_option("--sp", a->sp, "Fix sequence parallelism")->check(CLI::IsMember({"on", "off"}));
  sub->add_flag("--hybrid-shard", a->hybrid_shard,
                "Also search hybrid sharding: ZeRO's states sharded within each node, replicated across nodes "
                "(HSDP; layout key shard=N)");
  sub->add_option("--recompute", a->recompute, "Fix activation recompute")
      ->check(CLI::IsMember({"none", "selective", "full"}));
  auto* val = sub->add_subcommand("validate", "Predict published runs (CSV in the calibration schema) and report errors");
  val->add_option("files", a->csv, "CSV files, e.g. configs/calibration/published_runs.csv published_runs_more.csv")
      ->required();
  val->add_flag("--json", a->validate_json, "Print a JSON array of per-row predictions");
  val->add_flag("--fit", a->fit, "Fit the stack profiles' parameters on these rows first (prints them)");
  val->add_option("--cross-validate", a->cross_validate,
                  "source: refit the profiles without each source in turn and predict it (leave-one-source-out)");
  val->add_option("--explain", a->explain_rows,
                  "Break down the predicted step of row ROW (validate's first column; a range 5-8 or a list 3,7) "
                  "by term, beside the reported figure, the error and the efficiency the reported figure implies")
      ->type_name("ROW");
  val->add_option("--fail-above-median", a->fail_median, "Exit 1 if the median |error| exceeds this many percent")
      ->check(real_in(0, 1e6));
  val->add_option("--fail-above-max", a->fail_max, "Exit 1 if the max |error| exceeds this many percent")
      ->check(real_in(0, 1e6));
  sub->require_subcommand(0, 1);
  return {sub, [a, val, sub] {
    a->seq_given = sub->count("--seq") > 0;
    a->explain_given = val->count("--explain") > 0;
    return val->parsed() ? run_validate(*a) : run_plan(*a);
  }};
}

}  // namespace tera::cli
