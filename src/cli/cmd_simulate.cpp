// `tera simulate`: one training step of a layout on a cluster, event by event
// (plan/simulator.h over the runtime's schedule), with per-stage bubble and
// exposed communication and an optional Chrome trace; or a weak/strong
// scaling sweep (plan/sweep_plan.h, plan/scaling.h) with an optional failure
// model and SVG plot.
// Bad input is a message naming the flag and the fix, exit code 2.
#include <CLI/CLI.hpp>
#include <fmt/format.h>

#include <cmath>
#include <memory>

#include "cli/commands.h"
#include "cli/flag_checks.h"
#include "core/file_util.h"
#include "core/format.h"
#include "core/path_overlap.h"
#include "core/timer.h"
#include "plan/presets.h"
#include "plan/report.h"
#include "plan/scaling.h"
#include "plan/scaling_plot.h"
#include "plan/sim_trace.h"
#include "plan/sweep_plan.h"

namespace tera::cli {

namespace {

struct SimulateArgs {
  std::string model, cluster, layout, schedule, precision = "bf16", trace, plot;
  int64_t global_batch = 0, seq = 0, gpus = 0;
  bool json = false, no_memory_check = false;
  // Sweeps.
  std::string sweep, points;
  int64_t from = 0, to = 0;
  bool replan = false, seq_given = false;
  double node_mtbf_hours = 0, ckpt_write_s = 0, restart_s = 0, train_tokens = 0;
};

int bad(const std::string& msg) {
  print_error(msg);
  return kExitBadInput;
}


Status write_text(const std::string& path, const std::string& text) {
  auto f = AtomicFile::create(path);
  if (!f) return f.status();
  TERA_RETURN_IF_ERROR(f->write(text.data(), text.size()));
  return f->commit();
}

// Days past two days (times to train), else core/format.h's h/m/s.
std::string duration_text(double seconds) {
  if (seconds >= 2 * 86400) return fmt::format("{:.1f} days", seconds / 86400);
  return human_duration(seconds);
}

// Per stage, where its step goes; the columns add up to the stage's end.
std::string stages_table(const SimResult& r) {
  std::string s = fmt::format("{:>5}  {:>10} {:>10} {:>10} {:>10} {:>10} {:>10} {:>10}  {:>10}\n", "stage", "compute",
                              "tp-exposed", "zero-exp.", "bubble", "p2p-block", "dp-exposed", "optimizer", "end (s)");
  for (size_t i = 0; i < r.stages.size(); ++i) {
    const StageTimeline& t = r.stages[i];
    s += fmt::format("{:>5}  {:>10.4f} {:>10.4f} {:>10.4f} {:>10.4f} {:>10.4f} {:>10.4f} {:>10.4f}  {:>10.4f}{}\n", i,
                     t.busy.compute(), t.busy.tp_comm, t.busy.dp_comm, t.wait, t.p2p, t.dp_exposed, t.optimizer, t.end,
                     static_cast<int>(i) == r.critical_stage ? "  <- last to finish" : "");
  }
  return s;
}

nlohmann::json stages_json(const SimResult& r) {
  nlohmann::json a = nlohmann::json::array();
  for (size_t i = 0; i < r.stages.size(); ++i) {
    const StageTimeline& t = r.stages[i];
    a.push_back({{"stage", i},
                 {"compute_s", t.busy.compute()},
                 {"gemm_s", t.busy.gemm},
                 {"attention_s", t.busy.attention},
                 {"memory_bound_s", t.busy.memory},
                 {"tp_exposed_s", t.busy.tp_comm},
                 {"zero_exposed_s", t.busy.dp_comm},
                 {"bubble_s", t.wait},
                 {"p2p_blocking_s", t.p2p},
                 {"dp_exposed_s", t.dp_exposed},
                 {"optimizer_s", t.optimizer},
                 {"end_s", t.end}});
  }
  return a;
}

struct Setup {
  Workload w;
  Cluster cl;
};

Expected<Setup> load_setup(const SimulateArgs& a) {
  if (a.model.empty()) return Status::error("--model is required (a preset name, e.g. frontier-175b, or a .toml file)");
  if (a.cluster.empty()) return Status::error("--cluster is required (a preset name, e.g. frontier, or a .toml file)");
  if (a.global_batch < 1) return Status::error("--global-batch (sequences per step) is required and must be >= 1");
  auto model = load_model(a.model);
  if (!model.ok()) return Status::error("--model: " + model.error());
  auto cluster = load_cluster(a.cluster);
  if (!cluster.ok()) return Status::error("--cluster: " + cluster.error());
  Setup s;
  s.w.model = *model;
  if (a.seq_given) s.w.model.seq_len = a.seq;
  if (Status v = validate_model_config(s.w.model); !v) return Status::error("--seq " + std::to_string(a.seq) + ": " + v.message());
  s.w.untied_embeddings = untied_by_family(s.w.model);
  s.w.global_batch = a.global_batch;
  auto prec = parse_precision(a.precision);
  if (!prec.ok()) return Status::error("--precision: " + prec.error());
  s.w.precision = *prec;
  if (auto pk = peak_flops(*cluster, s.w.precision); !pk.ok()) return pk.status();
  s.cl = std::move(*cluster);
  return s;
}

Expected<ParallelLayout> layout_from_args(const SimulateArgs& a, int64_t gpus) {
  auto l = parse_layout(a.layout, static_cast<int>(gpus));
  if (!l.ok()) return Status::error("--layout: " + l.error());
  if (!a.schedule.empty()) {
    auto k = parse_schedule_kind(a.schedule);
    if (!k.ok()) return Status::error("--schedule: " + k.error());
    l->schedule = *k;
  }
  return l;
}

std::string fits_text(const Evaluation& e, const Cluster& cl) {
  return fmt::format("{:.1f} GiB of {:.1f} GiB per GPU (stage {}, the fullest){}", e.memory.total() / kGiB,
                     cl.gpu.memory_bytes / kGiB, e.memory.stage, e.fits ? "" : " -- DOES NOT FIT");
}

int run_single(const SimulateArgs& a, const Setup& st) {
  if (a.layout.empty()) return bad("simulate: --layout is required, e.g. --layout tp=8,pp=16,dp=8,mb=1,zero=1");
  if (!a.plot.empty()) return bad("simulate: --plot draws a sweep; add --sweep weak|strong --from N --to M");
  auto l = layout_from_args(a, a.gpus);
  if (!l.ok()) return bad(l.error());
  const int gpus = l->world();
  if (a.gpus > 0 && a.gpus != gpus) {
    return bad(fmt::format("--layout: tp({}) * pp({}) * dp({}) = {} != --gpus {}", l->tp, l->pp, l->dp, gpus, a.gpus));
  }
  const Workload& w = st.w;
  const Cluster& cl = st.cl;
  if (Status s = check_layout(*l, w, gpus); !s) return bad("--layout: " + s.message());
  const ModelSpec spec(w.model);
  Stopwatch clock;
  Evaluation e = evaluate_layout(spec, *l, w, cl);
  const double sim_seconds = clock.seconds();
  if (!e.fits && !a.no_memory_check) {
    return bad(fmt::format("--layout {} does not fit: {}\n{}use more pipeline or tensor parallelism, ZeRO, recompute "
                           "or a smaller micro-batch (tera plan finds one), or pass --no-memory-check to simulate it anyway",
                           layout_string(*l), fits_text(e, cl), memory_text(e.memory, cl)));
  }
  if (!e.fits) print_error("warning: the layout does not fit in memory (simulated anyway, --no-memory-check)");
  if (!a.trace.empty()) {
    // The same step again, recording every instruction's interval.
    const Schedule sch = make_schedule(l->schedule, l->pp, static_cast<int>(micro_batches(*l, w)), l->vpp).value();
    std::vector<SimSpan> spans;
    simulate_step(sch, price_step(spec, *l, w, cl), SimOptions{cl.stack.dp_overlap, cl.stack.p2p_overlap, cl.eff.overlap_loss},
                  &spans);
    if (Status s = write_sim_trace(a.trace, spans, *l); !s) return bad("--trace " + a.trace + ": " + s.message());
  }
  if (a.json) {
    nlohmann::json j = evaluation_json(e);
    j["gpus"] = gpus;
    j["global_batch"] = w.global_batch;
    j["seq_len"] = w.model.seq_len;
    j["micro_batches"] = micro_batches(*l, w);
    j["critical_stage"] = e.sim.critical_stage;
    j["stages"] = stages_json(e.sim);
    fmt::print("{}\n", j.dump(2));
    return kExitOk;
  }
  const int64_t M = micro_batches(*l, w);
  fmt::print("tera simulate: {} ({} parameters, seq {}) on {}: {} x {} ({} nodes), global batch {} sequences, {} precision\n",
             a.model, human_count(static_cast<double>(spec.num_params())), w.model.seq_len, cl.name, gpus, cl.gpu.name,
             (gpus + cl.node.gpus - 1) / cl.node.gpus, w.global_batch, precision_name(w.precision));
  fmt::print("layout {}\n", layout_string(*l));
  fmt::print("schedule {}: {} stages{}, {} micro-batches of {} per pipeline; simulated one replica ({} stage clocks, "
             "{} identical replicas priced by formula) in {:.3f} s\n",
             schedule_kind_name(l->schedule), l->pp, l->vpp > 1 ? fmt::format(" x {} chunks", l->vpp) : "", M,
             l->micro_batch, l->pp, l->dp, sim_seconds);
  fmt::print("memory: {}\n", fits_text(e, cl));
  fmt::print("step time {:.4f} s | {:.0f} tokens/s | {:.1f} model TFLOP/s per GPU | MFU {:.1f}% | HFU {:.1f}%\n",
             e.step_time_s, e.tokens_per_s, e.tflops_per_gpu, 100 * e.mfu, 100 * e.hfu);
  const StageTimeline& c = e.sim.stages[static_cast<size_t>(e.sim.critical_stage)];
  const double T = e.step_time_s;
  fmt::print("critical stage {}: bubble {:.1f}%, exposed communication tp {:.1f}%, p2p {:.1f}%, dp {:.1f}% of the step\n",
             e.sim.critical_stage, 100 * c.wait / T, 100 * c.busy.tp_comm / T, 100 * c.p2p / T,
             100 * (c.dp_exposed + c.busy.dp_comm) / T);
  fmt::print("\nper stage, seconds (compute + tp-exposed + zero-exposed + bubble + p2p-block + dp-exposed + optimizer "
             "= end):\n{}",
             stages_table(e.sim));
  if (!a.trace.empty()) fmt::print("trace: {} (one track per stage; open in https://ui.perfetto.dev)\n", a.trace);
  return kExitOk;
}

std::string sweep_table(const SweepResult& r, const Cluster& cl, bool failures, bool ttt) {
  std::string s = fmt::format("{:>7} {:>6}  {:>3} {:>3} {:>6} {:>3} {:>3} {:>4} {:>2} {:>9}  {:>7}  {:>10}  {:>12}  {:>8}  "
                              "{:>5}  {:>6}  {:>6}  {:>4}",
                              "gpus", "nodes", "tp", "pp", "dp", "vpp", "mb", "zero", "sp", "recompute", "batch",
                              "step(s)", "tokens/s", "TFLOP/s/GPU", "MFU", "bubble", "eff", "fits");
  if (failures) s += fmt::format("  {:>9}  {:>10}  {:>7}", "sys MTBF", "ckpt every", "goodput");
  if (ttt) s += fmt::format("  {:>13}", "time to train");
  s += "\n";
  for (const SweepPoint& p : r.points) {
    const ParallelLayout& l = p.eval.layout;
    s += fmt::format("{:>7} {:>6}  {:>3} {:>3} {:>6} {:>3} {:>3} {:>4} {:>2} {:>9}  {:>7}  {:>10.3f}  {:>12.0f}  {:>8.1f}  "
                     "{:>4.1f}%  {:>5.1f}%  {:>5.1f}%  {:>4}",
                     p.gpus, (p.gpus + cl.node.gpus - 1) / cl.node.gpus, l.tp, l.pp, l.dp, l.vpp, l.micro_batch, l.zero,
                     l.sequence_parallel ? 1 : 0, recompute_name(l.recompute), p.global_batch, p.eval.step_time_s,
                     p.eval.tokens_per_s, p.eval.tflops_per_gpu, 100 * p.eval.mfu, 100 * p.eval.bubble,
                     100 * p.efficiency, p.eval.fits ? "yes" : "NO");
    if (p.failure) {
      s += fmt::format("  {:>9}  {:>10}  {:>6.1f}%", human_duration(p.failure->system_mtbf_s),
                       human_duration(p.failure->interval_s), 100 * p.failure->goodput);
    }
    if (ttt) s += fmt::format("  {:>13}", duration_text(p.time_to_train_s));
    s += "\n";
  }
  return s;
}

nlohmann::json sweep_json(const SweepResult& r) {
  nlohmann::json a = nlohmann::json::array();
  for (const SweepPoint& p : r.points) {
    nlohmann::json j = evaluation_json(p.eval);
    j["gpus"] = p.gpus;
    j["global_batch"] = p.global_batch;
    j["efficiency"] = p.efficiency;
    if (p.failure) {
      j["nodes"] = p.failure->nodes;
      j["system_mtbf_s"] = p.failure->system_mtbf_s;
      j["ckpt_interval_s"] = p.failure->interval_s;
      j["goodput"] = p.failure->goodput;
    }
    if (p.time_to_train_s > 0) j["time_to_train_s"] = p.time_to_train_s;
    a.push_back(std::move(j));
  }
  return a;
}

// The sweep's text report: what ran, the table, skipped points, notes on
// efficiencies above 100% and layouts that do not fit.
void print_sweep(const SimulateArgs& a, const Workload& w, const Cluster& cl, const SweepOptions& o,
                 const SweepResult& result, double seconds, bool planned_first) {
  const SweepResult* r = &result;
  const ModelSpec spec(w.model);
  fmt::print("tera simulate --sweep {}: {} ({} parameters, seq {}) on {}, global batch {} at {} GPUs{}; {}\n", a.sweep,
             a.model, human_count(static_cast<double>(spec.num_params())), w.model.seq_len, cl.name, w.global_batch,
             o.gpus.front(), a.sweep == "weak" ? " (grows with the GPU count)" : " (fixed)",
             o.layout ? "fixed layout, dp scales" : "layout re-planned at every point");
  fmt::print("{} points simulated in {:.3f} s; efficiency = tokens/s per GPU relative to the first point\n",
             r->points.size(), seconds);
  if (planned_first) {
    fmt::print("layout: the best at {} GPUs, held fixed ({}); --replan searches every point\n", o.gpus.front(),
               layout_string(*o.layout));
  }
  if (o.failures) {
    fmt::print("failure model: node MTBF {} h, checkpoint write {} s, restart {} s; interval sqrt(2 x write x MTBF/nodes) "
               "(Young), goodput from Daly's model\n",
               a.node_mtbf_hours, a.ckpt_write_s, a.restart_s);
  }
  fmt::print("\n{}", sweep_table(*r, cl, o.failures.has_value(), o.train_tokens > 0));
  for (const std::string& s : r->skipped) fmt::print("skipped {}\n", s);
  // An efficiency above 100% has a cause other than scaling; say which.
  for (const std::string& note : efficiency_notes(*r)) fmt::print("note: {}\n", note);
  for (const SweepPoint& p : r->points) {
    if (!p.eval.fits) {
      fmt::print("warning: at {} GPUs the layout needs {:.1f} GiB per GPU of {:.1f} GiB (fits = NO)\n", p.gpus,
                 p.eval.memory.total() / kGiB, cl.gpu.memory_bytes / kGiB);
    }
  }
}

int run_sweep_command(const SimulateArgs& a, const Setup& st) {
  if (a.sweep != "weak" && a.sweep != "strong") {
    return bad("--sweep " + a.sweep + ": choose weak (global batch grows with dp) or strong (global batch fixed)");
  }
  if (!a.trace.empty()) return bad("--trace records one step; drop --sweep, or --trace, and simulate one layout");
  if (a.gpus > 0) return bad("--gpus names one GPU count; a sweep takes --from N --to M or --points N1,N2,...");
  if (!a.points.empty() && (a.from || a.to)) return bad("give either --points or --from/--to, not both");
  if (a.points.empty() && (a.from < 1 || a.to < 1)) {
    return bad("--sweep needs the GPU counts: --from N --to M (doubling from N) or --points N1,N2,...");
  }
  if (a.replan && !a.layout.empty()) {
    return bad("--replan searches the layout at every point; drop --layout (or drop --replan to scale dp of a fixed layout)");
  }
  const Workload& w = st.w;
  const Cluster& cl = st.cl;
  SweepRequest req;
  req.kind = a.sweep == "weak" ? SweepKind::weak : SweepKind::strong;
  req.from = a.from;
  req.to = a.to;
  req.replan = a.replan;
  if (!a.points.empty()) {
    auto p = parse_points(a.points);
    if (!p.ok()) return bad(p.error());
    req.points = *p;
  }
  if (!a.layout.empty()) {
    auto l = layout_from_args(a, a.points.empty() ? a.from : req.points.front());
    if (!l.ok()) return bad(l.error());
    req.layout = *l;
  }
  auto planned = plan_sweep(w, cl, req);
  if (!planned) return bad(planned.error());
  SweepOptions& o = planned->options;
  const bool planned_first = planned->planned_first;
  const bool any_failure = a.node_mtbf_hours > 0 || a.ckpt_write_s > 0 || a.restart_s > 0;
  if (any_failure) {
    FailureModel f{a.node_mtbf_hours * 3600, a.ckpt_write_s, a.restart_s};
    if (Status s = check_failure_model(f); !s) {
      return bad("failure model: " + s.message() + "; give --node-mtbf-hours and --ckpt-write-s together");
    }
    o.failures = f;
  }
  if (a.train_tokens < 0) return bad("--train-tokens must be > 0");
  o.train_tokens = a.train_tokens;
  const ModelSpec spec(w.model);
  Stopwatch clock;
  auto r = run_sweep(spec, w, cl, o);
  const double seconds = clock.seconds();
  if (!r.ok()) return bad("sweep: " + r.error());
  if (!a.plot.empty()) {
    const std::string label = fmt::format("{} on {}{}", a.model, cl.name,
                                          o.layout ? fmt::format(" (tp={} pp={}, dp scales)", o.layout->tp, o.layout->pp)
                                                   : std::string(" (re-planned per point)"));
    const std::string title = fmt::format("{} scaling: {} on {}, global batch {} at {} GPUs", a.sweep == "weak" ? "Weak" : "Strong",
                                          a.model, cl.name, w.global_batch, o.gpus.front());
    if (Status s = write_text(a.plot, scaling_svg({plot_series(*r, label)}, title)); !s) {
      return bad("--plot " + a.plot + ": " + s.message());
    }
  }
  if (a.json) {
    fmt::print("{}\n", sweep_json(*r).dump(2));
    return kExitOk;
  }
  print_sweep(a, w, cl, o, *r, seconds, planned_first);
  if (!a.plot.empty()) fmt::print("plot: {}\n", a.plot);
  return kExitOk;
}

int run_simulate(const SimulateArgs& a) {
  // Negative durations are refused, never read as "not given" (0 means not given).
  for (const auto& [v, flag] : {std::pair{a.node_mtbf_hours, "--node-mtbf-hours"}, std::pair{a.ckpt_write_s, "--ckpt-write-s"},
                                std::pair{a.restart_s, "--restart-s"}, std::pair{a.train_tokens, "--train-tokens"}}) {
    if (v < 0 || !std::isfinite(v)) return bad(fmt::format("{} {} must be a positive number", flag, v));
  }
  // Output paths are checked before any work, so a sweep never fails at its end.
  for (const auto& [path, flag] : {std::pair{&a.trace, "--trace"}, std::pair{&a.plot, "--plot"}}) {
    if (path->empty()) continue;
    if (Status s = probe_output_file(*path, flag); !s) return bad(s.message());
  }
  auto st = load_setup(a);
  if (!st.ok()) return bad("simulate: " + st.error());
  {
    // An output never replaces the presets read (found above, so both exist).
    const std::vector<InputPath> inputs = {{find_preset("models", a.model).value(), "--model"},
                                           {find_preset("clusters", a.cluster).value(), "--cluster"}};
    if (Status s = refuse_overlapping_paths({{a.trace, "--trace", {}}, {a.plot, "--plot", {}}}, inputs); !s) {
      return bad(s.message());
    }
  }
  const bool sweep_flags = !a.points.empty() || a.from || a.to || a.replan || !a.plot.empty() || a.node_mtbf_hours > 0 ||
                           a.ckpt_write_s > 0 || a.restart_s > 0 || a.train_tokens > 0;
  if (a.sweep.empty()) {
    if (sweep_flags) {
      return bad("--from/--to/--points/--replan/--plot and the failure flags belong to a sweep; add --sweep weak|strong");
    }
    return run_single(a, *st);
  }
  return run_sweep_command(a, *st);
}

}  // namespace

Command add_simulate_command(CLI::App& parent) {
  auto a = std::make_shared<SimulateArgs>();
  auto* sub = parent.add_subcommand("simulate", "Simulate one training step of a layout, or a weak/strong scaling sweep");
  sub->add_option("--model", a->model, "Model preset name (configs/models) or TOML file");
  sub->add_option("--cluster", a->cluster, "Cluster preset name (configs/clusters) or TOML file");
  sub->add_option("--layout", a->layout, "tp=..,pp=..,dp=..[,vpp=..,mb=..,zero=..,sp=..,recompute=..,schedule=..]");
  sub->add_option("--global-batch", a->global_batch, "Sequences per optimizer step (a sweep: at its first point)")
      ->check(int_in(1, kMaxPlanGlobalBatch));
  sub->add_option("--gpus", a->gpus, "GPU count (optional: dp then defaults to gpus / (tp * pp))")
      ->check(int_in(1, kMaxPlanGpus));
  sub->add_option("--seq", a->seq, "Sequence length (default: the model's)")->check(int_in(1, kMaxPlanSeq));
  sub->add_option("--schedule", a->schedule, "Pipeline schedule: gpipe, 1f1b, interleaved or zb-h1 (default: from vpp)");
  sub->add_option("--precision", a->precision, kPrecisionHelp)->capture_default_str();
  sub->add_option("--trace", a->trace, "Write the simulated step as a Chrome trace (the format of tera train --trace)");
  sub->add_flag("--json", a->json, "Print JSON (one object, or an array of sweep points)");
  sub->add_flag("--no-memory-check", a->no_memory_check, "Simulate a layout that does not fit in memory (warns)");
  sub->add_option("--sweep", a->sweep, "weak (global batch grows with the GPU count) or strong (fixed)");
  sub->add_option("--from", a->from, "First GPU count of the sweep (the reference point)")->check(int_in(1, kMaxPlanGpus));
  sub->add_option("--to", a->to, "Last GPU count (doubling from --from; the last is rounded down to whole replicas)")
      ->check(int_in(1, kMaxPlanGpus));
  sub->add_option("--points", a->points, "Explicit GPU counts instead of --from/--to, e.g. 1024,2048,3072");
  sub->add_flag("--replan", a->replan,
                "Search the best layout at every point (default: --layout, or the first point's best, held fixed)");
  sub->add_option("--plot", a->plot, "Write the sweep's efficiency curve as an SVG file");
  sub->add_option("--node-mtbf-hours", a->node_mtbf_hours, "Failure model: mean time between failures of one node")
      ->check(real_in(0, 1e9));
  sub->add_option("--ckpt-write-s", a->ckpt_write_s, "Failure model: seconds to write one checkpoint")
      ->check(real_in(0, 1e9));
  sub->add_option("--restart-s", a->restart_s, "Failure model: seconds to restart after a failure (default 0)")
      ->check(real_in(0, 1e9));
  sub->add_option("--train-tokens", a->train_tokens, "Tokens to train: prints the expected time to train per point")
      ->check(real_in(0, 1e18));
  return {sub, [a, sub] {
    a->seq_given = sub->count("--seq") > 0;
    return run_simulate(*a);
  }};
}

}  // namespace tera::cli
