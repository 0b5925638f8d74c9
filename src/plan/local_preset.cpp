// The `local` preset's fits; see local_preset.h.
#include "plan/local_preset.h"

#include <algorithm>
#include <fmt/format.h>

#include "plan/cost_model.h"
#include "plan/layer_ops.h"
#include "plan/presets.h"

namespace tera {

namespace {

// What the cost model counts for one training step of `model` on one GPU
// (micro-batches of `mb`, `m` of them): its GEMM-class time under `c`, and
// the ingredients of the memory-bound and attention classes, so either
// efficiency can be solved for from a measured class time.
struct StepOps {
  double gemm_s = 0;                                // GEMM-class time under the cluster
  double memory_ops = 0, memory_bytes = 0;          // memory-bound ops outside attention
  double attention_ops = 0, attention_flops = 0, attention_bytes = 0;  // matmul (or fused kernel) FLOPs, softmax bytes
};

StepOps count_step_ops(const ModelConfig& mc, int64_t mb, int64_t m, const Cluster& c) {
  const ModelSpec spec(mc);
  OpsOptions o;
  o.B = mb;
  o.T = mc.seq_len;
  o.act_bytes = 4;
  o.flash_attention = c.stack.flash_attention;
  StepOps s;
  auto add = [&](const PartOps& p, double times) {
    for (const PassOps* pass : {&p.fwd, &p.bwd}) {
      s.gemm_s += times * price_pass(*pass, c, c.gpu.peak_flops_32, 1).gemm;
      for (const Op& op : pass->ops) {
        if (op.cls == OpClass::memory) {
          s.memory_ops += times;
          s.memory_bytes += times * op.bytes;
        } else if (op.cls == OpClass::attention) {
          s.attention_ops += times;
          if (op.m > 0 || op.fused_attention) s.attention_flops += times * op.flops;
          else s.attention_bytes += times * op.bytes;
        }
      }
    }
  };
  const double mbs = static_cast<double>(m);
  add(block_ops(spec, o), mbs * static_cast<double>(mc.layers));
  add(embedding_ops(spec, o), mbs);
  add(head_ops(spec, o), mbs);
  return s;
}

// The preset's GPU, node and link keys from the measurements; without MPI
// the links are a shared-memory guess.
Cluster base_cluster(const CalibrationMeasurements& m, const GemmFit& fit) {
  Cluster c;
  c.name = "local";
  c.gpu.name = fmt::format("cpu-{}-threads", m.threads);
  c.gpu.peak_flops_32 = fit.peak;
  c.gpu.memory_bytes = m.memory_bytes;
  c.gpu.hbm_bw = m.bw;
  // One node of `ranks` "GPUs".
  const int ranks = m.ranks;
  c.node.gpus = ranks;
  c.node.package_gpus = 1;
  c.node.intra_bw = c.node.package_bw = m.mpi ? m.link.bw : m.bw / 2;
  c.node.nics = 1;
  c.node.nic_bw = (m.mpi ? m.link.bw : m.bw / 2) * ranks;  // per GPU: nic_bw * nics / gpus = the link
  c.eff.gemm_half_dim = fit.half_dim;
  c.eff.flash = 0.5;  // until the in-training runs fit it (fit_attention)
  c.eff.intra_link = c.eff.inter_link = 1.0;
  c.eff.alpha_intra = c.eff.alpha_inter = m.mpi ? m.link.alpha : 2e-6;
  return c;
}

// What a real all-reduce costs beyond the ping-pong (the reduction, its
// synchronisation): the cost model's all-reduce over the K ranks is
// 2 (K-1) alpha + 2 (K-1)/K bytes / (intra_gb_s * intra_link). Prints the fit.
void fit_all_reduce(const CalibrationMeasurements& m, Cluster* c, std::string* out) {
  const int ranks = m.ranks;
  const OverheadBandwidthFit ar = fit_overhead_bandwidth(m.all_reduces);
  const double steps = 2.0 * (ranks - 1), factor = 2.0 * (ranks - 1) / ranks;
  c->eff.alpha_intra = c->eff.alpha_inter = std::max(m.link.alpha, ar.overhead / steps);
  const double busbw = ar.bytes_per_s * factor;
  c->eff.intra_link = c->eff.inter_link = std::clamp(busbw / m.link.bw, 0.01, 1.0);
  for (const TimedBytes& t : m.all_reduces) {
    *out += fmt::format("  all-reduce over {} ranks, {:>7.0f} KiB: {:8.1f} us\n", ranks, t.bytes / 1024, t.seconds * 1e6);
  }
  *out += fmt::format("  all-reduce fit: {:.1f} us + bytes / {:.2f} GB/s (rms error {:.1f}%): alpha {:.2f} us, link "
             "efficiency {:.3g} of the ping-pong bandwidth\n",
             ar.overhead * 1e6, ar.bytes_per_s / 1e9, 100 * ar.rms_rel_error, c->eff.alpha_intra * 1e6,
             c->eff.intra_link);
}

// Memory-bound ops in isolation: the per-op overhead (the intercept) and a first hbm efficiency.
void fit_memory_alone(const CalibrationMeasurements& m, Cluster* c, std::string* out) {
  std::vector<TimedBytes> mem;
  for (const MemoryOpTiming& op : m.rt.memory) mem.push_back({op.bytes, op.seconds});
  const OverheadBandwidthFit mfit = fit_overhead_bandwidth(mem);
  c->eff.kernel_overhead = mfit.overhead;
  c->eff.hbm = std::clamp(mfit.bytes_per_s / m.bw, 0.01, 1.0);
  *out += fmt::format("  memory-bound kernels alone: {:.2f} us per op + bytes / {:.1f} GB/s (rms error {:.1f}%)\n",
             mfit.overhead * 1e6, mfit.bytes_per_s / 1e9, 100 * mfit.rms_rel_error);
}

// Inside training steps, summed over the reference runs:
//   GEMMs:  gemm_max = what the curve predicts / what the steps took (<= 1)
//   memory: hbm from the bytes and the time left after the per-op overhead
// Prints each run; returns each run's op counts (they do not depend on the efficiencies fitted here).
std::vector<StepOps> fit_gemm_and_memory(const CalibrationMeasurements& m, Cluster* c, std::string* out) {
  double gemm_pred = 0, gemm_meas = 0, mem_ops = 0, mem_bytes = 0, mem_meas = 0;
  std::vector<StepOps> counted;
  for (const InSituTimes& t : m.insitu) {
    const StepOps ops = count_step_ops(t.model, t.micro_batch, t.micro_batches, *c);
    counted.push_back(ops);
    gemm_pred += ops.gemm_s;
    gemm_meas += t.gemm_s;
    mem_ops += ops.memory_ops;
    mem_bytes += ops.memory_bytes;
    mem_meas += t.memory_s;
    *out += fmt::format("  in training ({} layers, hidden {}, seq {}, micro-batch {}): GEMMs {:.2f} ms (curve {:.2f}), "
               "attention {:.2f} ms, memory-bound {:.2f} ms, whole step {:.2f} ms\n",
               t.model.layers, t.model.hidden, t.model.seq_len, t.micro_batch, t.gemm_s * 1e3, ops.gemm_s * 1e3,
               t.attention_s * 1e3, t.memory_s * 1e3, t.step_s * 1e3);
  }
  c->eff.gemm_max = std::clamp(gemm_pred / gemm_meas, 0.05, 1.0);
  const double mem_transfer = mem_meas - mem_ops * c->eff.kernel_overhead;
  if (mem_transfer > 0) c->eff.hbm = std::clamp(mem_bytes / (m.bw * mem_transfer), 0.01, 1.0);
  return counted;
}

// Attention inside training steps. The runtime's flash kernel (model.attention
// = "flash", the default) is one fused op per pass, priced at the flash
// efficiency on the FLOPs it performs: fitted as their ratio to peak after the
// per-op overhead. Naive attention's matmuls and softmax are fitted apart (the
// fraction of peak on the matmul FLOPs, the per-score cost), or, if the two
// references cannot separate them, the matmuls carry it all. A fraction of
// peak lies in (0, 1]: on a busy machine the reference steps' attention can
// leave no time after the other terms (no estimate: priced as gemm_max) or run
// faster than the measured peak allows (bounded at 1); either is said.
void fit_attention(const CalibrationMeasurements& m, const std::vector<StepOps>& counted, Cluster* c, std::string* out) {
  double* fitted = c->stack.flash_attention ? &c->eff.flash : &c->eff.attention;
  std::vector<AttentionSample> att;  // the time left for the matmuls (fused: all of it after the overhead)
  if (c->stack.flash_attention) {
    for (size_t i = 0; i < m.insitu.size(); ++i) {
      att.push_back({counted[i].attention_flops, counted[i].attention_ops * c->eff.kernel_overhead, m.insitu[i].attention_s});
    }
    *fitted = fit_attention_efficiency(att, c->gpu.peak_flops_32);
  } else {
    std::vector<AttentionSample2> att2;  // matmuls and softmax apart
    for (size_t i = 0; i < m.insitu.size(); ++i) {
      const StepOps& ops = counted[i];
      const double overhead = ops.attention_ops * c->eff.kernel_overhead;
      att2.push_back({ops.attention_flops, ops.attention_bytes, overhead, m.insitu[i].attention_s});
      att.push_back({ops.attention_flops, overhead + ops.attention_bytes / (c->gpu.hbm_bw * c->eff.hbm),
                     m.insitu[i].attention_s});
    }
    if (!fit_attention_two(att2, c->gpu.peak_flops_32, c->gpu.hbm_bw, &c->eff.attention, &c->eff.softmax) ||
        c->eff.attention > 1 || c->eff.softmax > 1) {
      c->eff.softmax = 0;
      c->eff.attention = fit_attention_efficiency(att, c->gpu.peak_flops_32);
    }
  }
  std::string note;
  if (!(*fitted > 0)) {
    *fitted = c->eff.gemm_max;
    note = "; attention left no time after the other terms (a noisy machine?): priced as gemm_max";
  } else if (*fitted > 1) {
    note = fmt::format("; attention measured at {:.3g} of the measured peak (a noisy peak?): bounded at 1", *fitted);
    *fitted = 1;
  }
  if (c->stack.flash_attention) {
    *out += fmt::format("  fitted: gemm_max {:.3g}, hbm {:.3g} of triad, kernel overhead {:.2f} us, flash attention {:.3g} of "
               "peak{}\n",
               c->eff.gemm_max, c->eff.hbm, c->eff.kernel_overhead * 1e6, c->eff.flash, note);
  } else {
    *out += fmt::format("  fitted: gemm_max {:.3g}, hbm {:.3g} of triad, kernel overhead {:.2f} us, attention {:.3g} of peak, "
               "softmax {:.3g} of triad{}{}\n",
               c->eff.gemm_max, c->eff.hbm, c->eff.kernel_overhead * 1e6, c->eff.attention, c->eff.softmax,
               c->eff.softmax > 0 ? "" : " (not separable: as hbm)", note);
  }
}

}  // namespace

GemmFit fit_linear_layers(const RuntimeTimings& rt, std::string* rates, std::string* record) {
  std::vector<GemmSample> samples;
  *record = "linear = [\n";
  for (const LinearTiming& l : rt.linear) {
    const double flops = 2.0 * static_cast<double>(l.N * l.I * l.O);
    const double m = static_cast<double>(l.N), n = static_cast<double>(l.O), k = static_cast<double>(l.I);
    samples.push_back({m, n, k, flops / l.forward_s});
    samples.push_back({m, n, k, 2 * flops / l.backward_s});
    *rates += fmt::format("  linear N={:<5} in={:<5} out={:<5} forward {:6.1f} GFLOP/s, backward {:6.1f} GFLOP/s\n", l.N,
                          l.I, l.O, flops / l.forward_s / 1e9, 2 * flops / l.backward_s / 1e9);
    *record += fmt::format("  [{}, {}, {}, {:.4g}, {:.4g}],\n", l.N, l.I, l.O, flops / l.forward_s / 1e9,
                           2 * flops / l.backward_s / 1e9);
  }
  *record += "]  # N, in, out, forward GFLOP/s, backward GFLOP/s\n";
  return fit_gemm_curve(samples);
}

std::string measured_summary(const CalibrationMeasurements& m, const GemmFit& fit) {
  std::string out;
  if (m.mpi) {
    out += fmt::format("  MPI ping-pong rank 0 <-> 1: latency {:.2f} us, bandwidth {:.2f} GB/s\n", m.link.alpha * 1e6,
                       m.link.bw / 1e9);
  }
  out += fmt::format("  GEMM fit: {:.1f} GFLOP/s x f(m) f(n) f(k), half dim {:.0f} (rms error {:.1f}%)\n",
                     fit.peak / 1e9, fit.half_dim, 100 * fit.rms_rel_error);
  out += fmt::format("  triad bandwidth {:.1f} GB/s\n", m.bw / 1e9);
  return out;
}

Cluster fit_local_cluster(const CalibrationMeasurements& m, const GemmFit& fit, std::string* report) {
  Cluster c = base_cluster(m, fit);
  // The stack the runtime's reference runs used: its default attention, no dropout.
  c.stack.flash_attention = ModelConfig{}.attention == AttentionKind::flash;
  c.stack.dropout = false;
  if (m.mpi) fit_all_reduce(m, &c, report);
  c.eff.gemm_max = 1.0;  // until the in-training runs below set it
  fit_memory_alone(m, &c, report);
  const std::vector<StepOps> counted = fit_gemm_and_memory(m, &c, report);
  fit_attention(m, counted, &c, report);
  c.memory.reserved_bytes = 0.25 * (1 << 30);
  c.memory.fragmentation = 0.05;
  return c;
}

std::string local_preset_text(const Cluster& c, const CalibrationMeasurements& m, const GemmFit& fit,
                              const std::string& linear_record) {
  std::string record = linear_record;
  for (const MemoryOpTiming& op : m.rt.memory) {
    record += fmt::format("# {} {:.0f} bytes: {:.2f} us\n", op.op, op.bytes, op.seconds * 1e6);
  }
  const bool mpi = m.mpi;
  const int threads = m.threads, ranks = m.ranks;
  const std::string header = fmt::format(
      "# This machine, measured by `tera calibrate` ({} threads{}, {}). The runtime's linear\n"
      "# layers fitted to the planner's GEMM curve (peak_tflops_32 = its asymptotic rate); STREAM\n"
      "# triad as hbm_tb_s; the per-op overhead from memory-bound kernels timed alone; gemm_max, hbm,\n"
      "# attention and softmax from two profiled training runs (kernels inside real steps); system\n"
      "# memory as memory_gib (docs/plan.md, \"Cluster presets\"). {}\n"
      "# Regenerate with: {}build/tera calibrate\n",
      threads, mpi ? fmt::format(" per rank, {} ranks", ranks) : "", m.gemm_library,
      mpi ? "One MPI rank is one \"GPU\"; link bandwidth\n# from an MPI ping-pong between ranks 0 and 1, alpha_* and intra_link from all-reduces over\n# every rank (mpi_measured = true below)."
          : "One process using every core\n# is one \"GPU\". Link bandwidths and alpha_* are shared-memory estimates, not measured\n"
            "# (mpi_measured = false below; run under mpirun -n 2 to measure them).",
      mpi ? fmt::format("mpirun -n {} ", ranks) : "");
  std::string text = cluster_to_toml(c, header);
  text += fmt::format("\n[calibration]\nthreads = {}\nranks = {}\ngemm_fit_rms_rel_error = {:.4g}\ntriad_gb_s = {:.4g}\n"
                      "mpi_measured = {}\n{}{}",
                      threads, ranks, fit.rms_rel_error, m.bw / 1e9, mpi ? "true" : "false",
                      mpi ? fmt::format("mpi_latency_us = {:.4g}\nmpi_bandwidth_gb_s = {:.4g}\n", m.link.alpha * 1e6, m.link.bw / 1e9) : "",
                      record);
  return text;
}

}  // namespace tera
