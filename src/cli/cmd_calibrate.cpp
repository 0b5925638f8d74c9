// `tera calibrate`: measures this machine into a `local` cluster preset by
// timing the CPU runtime's own kernels at transformer-block shapes
// (runtime_calibration.h): linear layers fitted to the planner's GEMM
// efficiency curve, memory-bound ops to a per-op overhead, and two profiled
// training runs for the in-training GEMM, memory-bound and attention
// efficiencies (docs/plan.md, "Cluster presets"). Run alone, one process
// using every core is one "GPU" and the link keys hold shared-memory
// estimates (mpi_measured = false). Run under `mpirun -n K` (K >= 2), every
// rank is one "GPU" with the threads `tera train` would give it (cores / K),
// all ranks measure at once (they share the cores as training ranks do),
// ranks 0 and 1 ping-pong through the Communicator for the link bandwidth,
// all-reduces over every rank give alpha and the link efficiency, and rank 0
// writes the preset with node.gpus = K (mpi_measured = true).
// The preset goes to the user's configuration directory by default
// ($XDG_CONFIG_HOME/tera/clusters/local.toml, else ~/.config/tera/...), never
// into the source tree; --out is checked before any measuring, and an
// existing file is replaced only with --force.
#include <CLI/CLI.hpp>
#include <fmt/format.h>
#include <omp.h>

#include <unistd.h>

#include <algorithm>
#include <array>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <thread>
#include <memory>
#include <vector>

#include "cli/commands.h"
#include "cli/flag_checks.h"
#include "cli/output_paths.h"
#include "comm/agree.h"
#include "comm/world.h"
#include "core/file_util.h"
#include "core/timer.h"
#include "kernels/backend.h"
#include "cli/runtime_calibration.h"
#include "plan/calibration_fit.h"
#include "plan/cost_model.h"
#include "plan/hardware.h"
#include "plan/layer_ops.h"
#include "plan/presets.h"

namespace tera::cli {

namespace {

struct CalibrateArgs {
  std::string out;
  double seconds_per_shape = 0.2;
  bool force = false;
};

// <user config dir>/clusters/local.toml (plan/presets.h: where `--cluster
// local` looks first); empty when neither XDG_CONFIG_HOME nor HOME is set.
std::string default_preset_path() {
  const std::string dir = user_config_dir();
  return dir.empty() ? "" : (std::filesystem::path(dir) / "clusters/local.toml").string();
}

// STREAM-style triad a = b + s c over arrays far larger than the caches;
// bytes counted as STREAM does (two reads, one write); best of the repeats.
double triad_bandwidth(double budget) {
  const size_t n = size_t{1} << 24;  // 64 MiB per array
  std::vector<float> a(n, 0.0f), b(n, 1.0f), c(n, 2.0f);
  std::vector<double> rates;
  Stopwatch total;
  while (total.seconds() < budget || rates.size() < 3) {
    Stopwatch t;
#pragma omp parallel for schedule(static)
    for (size_t i = 0; i < n; ++i) a[i] = b[i] + 3.0f * c[i];
    rates.push_back(3.0 * 4.0 * static_cast<double>(n) / t.seconds());
  }
  return *std::max_element(rates.begin(), rates.end());
}

double system_memory_bytes() {
  std::ifstream f("/proc/meminfo");
  std::string key;
  double kb = 0;
  while (f >> key >> kb) {
    if (key == "MemTotal:") return kb * 1024;
    f.ignore(256, '\n');
  }
  return 8.0 * (1 << 30);
}

struct MpiLink {
  double alpha = 0;  // seconds, one-way latency of a small message
  double bw = 0;     // bytes/s of large messages (after the latency)
};

// Ping-pong between ranks 0 and 1 (others wait at the barrier): the best
// one-way time over repeats (at least 50), 8 B for alpha and 1-16 MiB for bw. Collective
// over `world`; the result is valid on rank 0.
MpiLink measure_mpi_link(Communicator& world, double budget) {
  constexpr int kTag = 91;
  const int r = world.rank();
  auto one_way = [&](int64_t bytes) {
    std::vector<char> buf(static_cast<size_t>(bytes), 1);
    double best = 1e300;
    // Rank 0 decides when to stop; rank 1 learns it from the first byte.
    Stopwatch total;
    for (int rep = 0;; ++rep) {
      char go = 0;
      if (r == 0) go = (total.seconds() < budget || rep < 50) ? 1 : 0;
      if (r <= 1) {
        if (r == 0) world.send(&go, 1, 1, kTag);
        else world.recv(&go, 1, 0, kTag);
      }
      if (!go) break;
      if (r == 0) {
        Stopwatch t;
        world.send(buf.data(), bytes, 1, kTag);
        world.recv(buf.data(), bytes, 1, kTag);
        best = std::min(best, t.seconds() / 2);
      } else if (r == 1) {
        world.recv(buf.data(), bytes, 0, kTag);
        world.send(buf.data(), bytes, 0, kTag);
      }
    }
    return best;
  };
  MpiLink link;
  if (r <= 1) {
    link.alpha = one_way(8);
    // MiB messages: the latency is noise next to the transfer, so bw = n / t
    // (subtracting a latency measured on a loaded machine could go negative).
    for (int64_t n : {int64_t{1} << 20, int64_t{4} << 20, int64_t{16} << 20}) {
      link.bw = std::max(link.bw, static_cast<double>(n) / one_way(n));
    }
  }
  world.barrier();
  return link;
}

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

// A deterministic text corpus (words from a small list) for the in-training
// calibration runs: the byte vocabulary needs no tokenizer.
Status write_calibration_corpus(const std::string& path) {
  static const char* kWords[] = {"the", "model", "trains", "on", "a", "cluster", "of", "many", "ranks", "and",
                                 "every", "layer", "is", "split", "across", "them", "while", "data", "flows", "through"};
  std::string text;
  uint64_t x = 88172645463325252ull;
  while (text.size() < (256u << 10)) {
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    text += kWords[x % (sizeof(kWords) / sizeof(kWords[0]))];
    text += (x >> 20) % 11 == 0 ? ".\n" : " ";
  }
  auto f = AtomicFile::create(path);
  if (!f.ok()) return f.status();
  Status st = f->write(text.data(), text.size());
  if (st) st = f->commit();
  return st;
}

// Blocking all-reduces over the whole world, as tensor parallelism issues
// them (back to back, every rank at once), at sizes from 4 KiB to 4 MiB: the
// median time per size (seconds, valid on every rank), fitted later to
// latency + bytes / bus bandwidth.
std::vector<TimedBytes> time_all_reduces(Communicator& world, double budget) {
  std::vector<TimedBytes> out;
  for (int64_t bytes : {int64_t{4} << 10, int64_t{64} << 10, int64_t{256} << 10, int64_t{1} << 20, int64_t{4} << 20}) {
    std::vector<float> buf(static_cast<size_t>(bytes / 4), 1.0f);
    std::vector<double> t;
    world.barrier();
    Stopwatch total;
    for (int rep = 0;; ++rep) {
      // Rank 0 decides when to stop (the same count on every rank).
      double go = world.rank() == 0 && (total.seconds() < budget || rep < 20) ? 1.0 : 0.0;
      world.broadcast(&go, 1, CommType::f64, 0);
      if (go == 0) break;
      Stopwatch w;
      world.all_reduce(buf.data(), static_cast<int64_t>(buf.size()), CommType::f32, ReduceOp::sum);
      t.push_back(w.seconds());
      std::fill(buf.begin(), buf.end(), 1.0f);
    }
    std::nth_element(t.begin(), t.begin() + static_cast<std::ptrdiff_t>(t.size() / 2), t.end());
    double med = t[t.size() / 2];
    // The slowest rank's median: a collective ends when its last rank does.
    med = world.all_reduce_max(med);
    out.push_back({static_cast<double>(bytes), med});
  }
  return out;
}

// Under MPI without OMP_NUM_THREADS, as `tera train`: the node's cores shared evenly among its ranks.
void set_rank_threads(const CommWorld& world, bool mpi) {
  if (mpi && std::getenv("OMP_NUM_THREADS") == nullptr) {
    const int cores = static_cast<int>(std::thread::hardware_concurrency());
    omp_set_num_threads(std::max(1, cores / std::max(1, world.local_size())));
  }
}

// Checks --out before any measuring (rank 0 checks; every rank stops
// together); false, printed by rank 0, when it is unusable.
bool check_out(const CalibrateArgs& a, Communicator& comm) {
  const bool first = comm.rank() == 0;
  Status out = ok_status();
  if (first) {
    out = a.out.empty() ? Status::error("--out: no default location (neither XDG_CONFIG_HOME nor HOME is set); pass "
                                        "--out FILE")
                        : check_output_file(a.out, "--out", a.force, /*create_parent=*/true);
  }
  if (Status s = agree(comm, out, "rank 0 refused --out (see its message)"); !s) {
    if (first) print_error(s.message());
    return false;
  }
  return true;
}

// The runtime's own kernels at transformer-block shapes; with MPI every
// rank measures at once (they share the cores as training ranks do) and
// the mean over ranks is what a rank gets.
RuntimeTimings measure_runtime(Communicator& comm, bool mpi, double seconds_per_shape) {
  RuntimeTimings rt = time_runtime_ops(cpu_backend(), seconds_per_shape, 3);
  if (mpi) {
    std::vector<double> flat = rt.flat();
    comm.all_reduce(flat.data(), static_cast<int64_t>(flat.size()), CommType::f64, ReduceOp::sum);
    for (double& x : flat) x /= comm.size();
    rt.set_flat(flat);
  }
  return rt;
}

// GEMM curve: a linear layer's forward is the cost model's GEMM (m=N, n=O,
// k=I); its backward two GEMMs of the same dims (the curve is symmetric).
// Rank 0 prints each layer's rates; `record` gets the table of them.
GemmFit fit_linear_layers(const RuntimeTimings& rt, bool first, std::string* record) {
  std::vector<GemmSample> samples;
  *record = "linear = [\n";
  for (const LinearTiming& l : rt.linear) {
    const double flops = 2.0 * static_cast<double>(l.N * l.I * l.O);
    const double m = static_cast<double>(l.N), n = static_cast<double>(l.O), k = static_cast<double>(l.I);
    samples.push_back({m, n, k, flops / l.forward_s});
    samples.push_back({m, n, k, 2 * flops / l.backward_s});
    if (first) {
      fmt::print("  linear N={:<5} in={:<5} out={:<5} forward {:6.1f} GFLOP/s, backward {:6.1f} GFLOP/s\n", l.N, l.I, l.O,
                 flops / l.forward_s / 1e9, 2 * flops / l.backward_s / 1e9);
    }
    *record += fmt::format("  [{}, {}, {}, {:.4g}, {:.4g}],\n", l.N, l.I, l.O, flops / l.forward_s / 1e9,
                           2 * flops / l.backward_s / 1e9);
  }
  *record += "]  # N, in, out, forward GFLOP/s, backward GFLOP/s\n";
  return fit_gemm_curve(samples);
}

// The same kernels inside real training steps (one rank each; with MPI all
// ranks at once), on two reference shapes unlike any benchmark's, in a
// scratch directory removed afterwards. Returns what failed ("" when none did).
std::string time_in_training(Communicator& comm, std::vector<InSituTimes>* insitu) {
  const std::filesystem::path work = std::filesystem::temp_directory_path() /
                                     fmt::format("tera-calibrate-{}-{}", static_cast<long>(getpid()), comm.rank());
  std::filesystem::create_directories(work);
  const std::string corpus = (work / "corpus.txt").string();
  std::string failure;
  if (Status st = write_calibration_corpus(corpus); !st) failure = "cannot write " + corpus + ": " + st.message();
  for (const auto& [layers, hidden, heads, seq, mb] : {std::array<int64_t, 5>{2, 96, 3, 128, 2}, {2, 384, 6, 256, 1}}) {
    if (!failure.empty()) break;
    ModelConfig mc;
    mc.layers = layers;
    mc.hidden = hidden;
    mc.heads = heads;
    mc.seq_len = seq;
    mc.vocab = 256;
    auto t = time_training(cpu_backend(), mc, mb, 2, 2, 6, corpus, (work / "out").string());
    if (!t) failure = "the in-training run failed: " + t.error();
    else insitu->push_back(*t);
  }
  std::error_code ignored;
  std::filesystem::remove_all(work, ignored);
  return failure;
}

// Each in-training time replaced by its mean over the ranks.
void mean_over_ranks(Communicator& comm, std::vector<InSituTimes>* insitu) {
  for (InSituTimes& t : *insitu) {
    double v[4] = {t.gemm_s, t.attention_s, t.memory_s, t.step_s};
    comm.all_reduce(v, 4, CommType::f64, ReduceOp::sum);
    t.gemm_s = v[0] / comm.size();
    t.attention_s = v[1] / comm.size();
    t.memory_s = v[2] / comm.size();
    t.step_s = v[3] / comm.size();
  }
}

// Everything one calibration measured (the means over ranks with MPI).
struct Measured {
  int threads = 0;
  int ranks = 1;  // "GPUs" of the node: the MPI ranks, else 1
  bool mpi = false;
  RuntimeTimings rt;
  GemmFit fit;
  std::string record;  // the linear-layer table and memory-op comments for [calibration]
  std::vector<InSituTimes> insitu;
  double bw = 0;  // triad bytes/s
  MpiLink link;
  std::vector<TimedBytes> all_reduces;
};

// Memory bandwidth, and with MPI the ping-pong link and the all-reduces. Collective.
void measure_links(Communicator& comm, double seconds_per_shape, Measured* m) {
  m->bw = triad_bandwidth(4 * seconds_per_shape);
  if (m->mpi) {
    m->bw = comm.all_reduce_sum(m->bw) / comm.size();
    m->link = measure_mpi_link(comm, 2 * seconds_per_shape);
    m->all_reduces = time_all_reduces(comm, seconds_per_shape);
  }
}

// Rank 0's lines for the memory-op record, the MPI link, the GEMM fit and the triad bandwidth.
void report_measured(Measured* m) {
  for (const MemoryOpTiming& op : m->rt.memory) {
    m->record += fmt::format("# {} {:.0f} bytes: {:.2f} us\n", op.op, op.bytes, op.seconds * 1e6);
  }
  if (m->mpi) {
    fmt::print("  MPI ping-pong rank 0 <-> 1: latency {:.2f} us, bandwidth {:.2f} GB/s\n", m->link.alpha * 1e6,
               m->link.bw / 1e9);
  }
  fmt::print("  GEMM fit: {:.1f} GFLOP/s x f(m) f(n) f(k), half dim {:.0f} (rms error {:.1f}%)\n", m->fit.peak / 1e9,
             m->fit.half_dim, 100 * m->fit.rms_rel_error);
  fmt::print("  triad bandwidth {:.1f} GB/s\n", m->bw / 1e9);
}

// The preset's GPU, node and link keys from the measurements; without MPI
// the links are a shared-memory guess.
Cluster base_cluster(const Measured& m) {
  Cluster c;
  c.name = "local";
  c.gpu.name = fmt::format("cpu-{}-threads", m.threads);
  c.gpu.peak_flops_32 = m.fit.peak;
  c.gpu.memory_bytes = system_memory_bytes();
  c.gpu.hbm_bw = m.bw;
  // One node of `ranks` "GPUs".
  const int ranks = m.ranks;
  c.node.gpus = ranks;
  c.node.package_gpus = 1;
  c.node.intra_bw = c.node.package_bw = m.mpi ? m.link.bw : m.bw / 2;
  c.node.nics = 1;
  c.node.nic_bw = (m.mpi ? m.link.bw : m.bw / 2) * ranks;  // per GPU: nic_bw * nics / gpus = the link
  c.eff.gemm_half_dim = m.fit.half_dim;
  c.eff.flash = 0.5;  // until the in-training runs fit it (fit_attention)
  c.eff.intra_link = c.eff.inter_link = 1.0;
  c.eff.alpha_intra = c.eff.alpha_inter = m.mpi ? m.link.alpha : 2e-6;
  return c;
}

// What a real all-reduce costs beyond the ping-pong (the reduction, its
// synchronisation): the cost model's all-reduce over the K ranks is
// 2 (K-1) alpha + 2 (K-1)/K bytes / (intra_gb_s * intra_link). Prints the fit.
void fit_all_reduce(const Measured& m, Cluster* c) {
  const int ranks = m.ranks;
  const OverheadBandwidthFit ar = fit_overhead_bandwidth(m.all_reduces);
  const double steps = 2.0 * (ranks - 1), factor = 2.0 * (ranks - 1) / ranks;
  c->eff.alpha_intra = c->eff.alpha_inter = std::max(m.link.alpha, ar.overhead / steps);
  const double busbw = ar.bytes_per_s * factor;
  c->eff.intra_link = c->eff.inter_link = std::clamp(busbw / m.link.bw, 0.01, 1.0);
  for (const TimedBytes& t : m.all_reduces) {
    fmt::print("  all-reduce over {} ranks, {:>7.0f} KiB: {:8.1f} us\n", ranks, t.bytes / 1024, t.seconds * 1e6);
  }
  fmt::print("  all-reduce fit: {:.1f} us + bytes / {:.2f} GB/s (rms error {:.1f}%): alpha {:.2f} us, link "
             "efficiency {:.3g} of the ping-pong bandwidth\n",
             ar.overhead * 1e6, ar.bytes_per_s / 1e9, 100 * ar.rms_rel_error, c->eff.alpha_intra * 1e6,
             c->eff.intra_link);
}

// Memory-bound ops in isolation: the per-op overhead (the intercept) and a first hbm efficiency.
void fit_memory_alone(const Measured& m, Cluster* c) {
  std::vector<TimedBytes> mem;
  for (const MemoryOpTiming& op : m.rt.memory) mem.push_back({op.bytes, op.seconds});
  const OverheadBandwidthFit mfit = fit_overhead_bandwidth(mem);
  c->eff.kernel_overhead = mfit.overhead;
  c->eff.hbm = std::clamp(mfit.bytes_per_s / m.bw, 0.01, 1.0);
  fmt::print("  memory-bound kernels alone: {:.2f} us per op + bytes / {:.1f} GB/s (rms error {:.1f}%)\n",
             mfit.overhead * 1e6, mfit.bytes_per_s / 1e9, 100 * mfit.rms_rel_error);
}

// Inside training steps, summed over the reference runs:
//   GEMMs:  gemm_max = what the curve predicts / what the steps took (<= 1)
//   memory: hbm from the bytes and the time left after the per-op overhead
// Prints each run; returns each run's op counts (they do not depend on the efficiencies fitted here).
std::vector<StepOps> fit_gemm_and_memory(const Measured& m, Cluster* c) {
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
    fmt::print("  in training ({} layers, hidden {}, seq {}, micro-batch {}): GEMMs {:.2f} ms (curve {:.2f}), "
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
void fit_attention(const Measured& m, const std::vector<StepOps>& counted, Cluster* c) {
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
    fmt::print("  fitted: gemm_max {:.3g}, hbm {:.3g} of triad, kernel overhead {:.2f} us, flash attention {:.3g} of "
               "peak{}\n",
               c->eff.gemm_max, c->eff.hbm, c->eff.kernel_overhead * 1e6, c->eff.flash, note);
  } else {
    fmt::print("  fitted: gemm_max {:.3g}, hbm {:.3g} of triad, kernel overhead {:.2f} us, attention {:.3g} of peak, "
               "softmax {:.3g} of triad{}{}\n",
               c->eff.gemm_max, c->eff.hbm, c->eff.kernel_overhead * 1e6, c->eff.attention, c->eff.softmax,
               c->eff.softmax > 0 ? "" : " (not separable: as hbm)", note);
  }
}

// The `local` preset fitted from the measurements, in order: links, memory-bound
// ops alone, then the in-training classes; prints each fit.
Cluster fit_cluster(const Measured& m) {
  Cluster c = base_cluster(m);
  // The stack the runtime's reference runs used: its default attention, no dropout.
  c.stack.flash_attention = ModelConfig{}.attention == AttentionKind::flash;
  c.stack.dropout = false;
  if (m.mpi) fit_all_reduce(m, &c);
  c.eff.gemm_max = 1.0;  // until the in-training runs below set it
  fit_memory_alone(m, &c);
  const std::vector<StepOps> counted = fit_gemm_and_memory(m, &c);
  fit_attention(m, counted, &c);
  c.memory.reserved_bytes = 0.25 * (1 << 30);
  c.memory.fragmentation = 0.05;
  return c;
}

// The preset file's text: a header saying how it was measured, the cluster, and a [calibration] table.
std::string preset_text(const Cluster& c, const Measured& m) {
  const bool mpi = m.mpi;
  const int threads = m.threads, ranks = m.ranks;
  const std::string header = fmt::format(
      "# This machine, measured by `tera calibrate` ({} threads{}, {}). The runtime's linear\n"
      "# layers fitted to the planner's GEMM curve (peak_tflops_32 = its asymptotic rate); STREAM\n"
      "# triad as hbm_tb_s; the per-op overhead from memory-bound kernels timed alone; gemm_max, hbm,\n"
      "# attention and softmax from two profiled training runs (kernels inside real steps); system\n"
      "# memory as memory_gib (docs/plan.md, \"Cluster presets\"). {}\n"
      "# Regenerate with: {}build/tera calibrate\n",
      threads, mpi ? fmt::format(" per rank, {} ranks", ranks) : "", cpu_backend().gemm_library,
      mpi ? "One MPI rank is one \"GPU\"; link bandwidth\n# from an MPI ping-pong between ranks 0 and 1, alpha_* and intra_link from all-reduces over\n# every rank (mpi_measured = true below)."
          : "One process using every core\n# is one \"GPU\". Link bandwidths and alpha_* are shared-memory estimates, not measured\n"
            "# (mpi_measured = false below; run under mpirun -n 2 to measure them).",
      mpi ? fmt::format("mpirun -n {} ", ranks) : "");
  std::string text = cluster_to_toml(c, header);
  text += fmt::format("\n[calibration]\nthreads = {}\nranks = {}\ngemm_fit_rms_rel_error = {:.4g}\ntriad_gb_s = {:.4g}\n"
                      "mpi_measured = {}\n{}{}",
                      threads, ranks, m.fit.rms_rel_error, m.bw / 1e9, mpi ? "true" : "false",
                      mpi ? fmt::format("mpi_latency_us = {:.4g}\nmpi_bandwidth_gb_s = {:.4g}\n", m.link.alpha * 1e6, m.link.bw / 1e9) : "",
                      m.record);
  return text;
}

// Writes the preset atomically to `out` once it reads back (same parser as every preset); the exit code.
int write_preset(const std::string& out, const std::string& text) {
  if (auto back = parse_cluster_toml(text, out); !back.ok()) {
    print_error("calibrate produced an unreadable preset: " + back.error());
    return kExitFailure;
  }
  auto f = AtomicFile::create(out);
  if (!f.ok()) {
    print_error("--out " + out + ": " + f.error());
    return kExitBadInput;
  }
  Status st = f->write(text.data(), text.size());
  if (st) st = f->commit();
  if (!st) {
    print_error("--out " + out + ": " + st.message());
    return kExitFailure;
  }
  fmt::print("wrote {}; plan with it as --cluster {}\n", out, out);
  return kExitOk;
}

// `tera calibrate`: every rank measures; rank 0 fits the preset and writes it.
int run_calibrate(const CalibrateArgs& a) {
  auto world = CommWorld::init();
  Communicator& comm = world->world();
  Measured m;
  m.mpi = world->is_mpi() && comm.size() >= 2;
  m.ranks = m.mpi ? comm.size() : 1;
  const bool first = comm.rank() == 0;
  set_rank_threads(*world, m.mpi);
  m.threads = omp_get_max_threads();
  const CreatedDirsGuard created(first && !a.out.empty() ? parent_dir(a.out) : std::string());
  if (!check_out(a, comm)) return kExitBadInput;
  if (first) {
    fmt::print("tera calibrate: {} threads{}, GEMM library {}\n", m.threads,
               m.mpi ? fmt::format(" per rank, {} MPI ranks measuring at once", comm.size()) : "",
               cpu_backend().gemm_library);
  }
  m.rt = measure_runtime(comm, m.mpi, a.seconds_per_shape);
  m.fit = fit_linear_layers(m.rt, first, &m.record);
  const std::string failure = time_in_training(comm, &m.insitu);
  // Every rank stops together (a lone early return would leave the others in a collective).
  if (any_rank(comm, !failure.empty())) {
    if (!failure.empty()) print_error("calibrate: " + failure);
    return kExitFailure;
  }
  if (m.mpi) mean_over_ranks(comm, &m.insitu);
  measure_links(comm, a.seconds_per_shape, &m);
  if (!first) return kExitOk;
  report_measured(&m);
  const Cluster c = fit_cluster(m);
  return write_preset(a.out, preset_text(c, m));
}

}  // namespace

Command add_calibrate_command(CLI::App& parent) {
  auto a = std::make_shared<CalibrateArgs>();
  a->out = default_preset_path();
  auto* sub = parent.add_subcommand("calibrate",
                                    "Measure this machine (the runtime's kernels alone and inside training steps, "
                                    "memory bandwidth; under mpirun the MPI links) into the local cluster preset");
  sub->add_option("--out", a->out, "Where to write the preset (default: the user's configuration directory)")
      ->capture_default_str();
  sub->add_flag("--force", a->force, "Replace an existing --out (atomically)");
  sub->add_option("--seconds", a->seconds_per_shape,
                  "Measuring time per kernel shape (the in-training runs take a fixed few seconds)")
      ->capture_default_str()
      ->check(real_in(0.01, 60));
  return {sub, [a] { return run_calibrate(*a); }};
}

}  // namespace tera::cli
