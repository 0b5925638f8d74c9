// `tera calibrate`: measures this machine into a `local` cluster preset: fp32
// GEMM rates over transformer-like shapes (fitted to the planner's GEMM
// efficiency curve) and streaming memory bandwidth. Run alone, one process
// using every core is one "GPU" and the link keys hold shared-memory
// estimates (mpi_measured = false). Run under `mpirun -n K` (K >= 2), every
// rank is one "GPU" with the threads `tera train` would give it (cores / K),
// all ranks measure GEMMs at once (they share the cores as training ranks
// do), ranks 0 and 1 ping-pong through the Communicator for MPI latency and
// bandwidth (alpha-beta: t(n) = alpha + n / bw), and rank 0 writes the preset
// with node.gpus = K (mpi_measured = true).
#include <CLI/CLI.hpp>
#include <fmt/format.h>
#include <omp.h>

#include <algorithm>
#include <fstream>
#include <thread>
#include <memory>
#include <vector>

#include "cli/commands.h"
#include "comm/world.h"
#include "core/file_util.h"
#include "core/timer.h"
#include "kernels/backend.h"
#include "plan/calibration_fit.h"
#include "plan/hardware.h"
#include "plan/presets.h"

namespace tera::cli {

namespace {

struct CalibrateArgs {
  std::string out;
  double seconds_per_shape = 0.2;
};

// Best-of-repeats GEMM rate C[m,n] = A[m,k] B[k,n] (FLOP/s): other load on the
// machine only ever slows a repeat down, so the fastest is the capability.
double gemm_rate(int64_t m, int64_t n, int64_t k, double budget) {
  std::vector<float> A(static_cast<size_t>(m * k), 0.5f), B(static_cast<size_t>(k * n), 0.25f), C(static_cast<size_t>(m * n));
  const Backend& be = cpu_backend();
  auto once = [&] { be.gemm(false, false, m, n, k, 1.0f, A.data(), k, B.data(), n, 0.0f, C.data(), n); };
  once();  // warm-up
  std::vector<double> rates;
  Stopwatch total;
  while (total.seconds() < budget || rates.size() < 3) {
    Stopwatch t;
    once();
    rates.push_back(2.0 * static_cast<double>(m * n * k) / t.seconds());
  }
  return *std::max_element(rates.begin(), rates.end());
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

int run_calibrate(const CalibrateArgs& a) {
  auto world = CommWorld::init();
  Communicator& comm = world->world();
  const bool mpi = world->is_mpi() && comm.size() >= 2;
  const bool first = comm.rank() == 0;
  if (mpi && std::getenv("OMP_NUM_THREADS") == nullptr) {
    // As `tera train`: the node's cores shared evenly among its ranks.
    const int cores = static_cast<int>(std::thread::hardware_concurrency());
    omp_set_num_threads(std::max(1, cores / std::max(1, world->local_size())));
  }
  const int threads = omp_get_max_threads();
  if (first) {
    fmt::print("tera calibrate: {} threads{}, GEMM library {}\n", threads,
               mpi ? fmt::format(" per rank, {} MPI ranks measuring at once", comm.size()) : "",
               cpu_backend().gemm_library);
  }
  // Square GEMMs and GPT-2-small-like training GEMMs (tokens x width x width).
  const std::vector<std::array<int64_t, 3>> shapes = {
      {64, 64, 64},      {128, 128, 128},   {256, 256, 256},   {512, 512, 512},  {1024, 1024, 1024},
      {1024, 768, 768},  {1024, 2304, 768}, {1024, 3072, 768}, {1024, 768, 3072}, {256, 768, 768},
      {4096, 768, 768},  {768, 768, 1024},  {64, 768, 768},    {1024, 64, 1024}};
  // Rounds over all shapes, keeping each shape's best: a burst of load from
  // other processes then spoils one round of a shape, not its figure.
  constexpr int kRounds = 3;
  std::vector<double> best(shapes.size(), 0.0);
  for (int round = 0; round < kRounds; ++round) {
    for (size_t i = 0; i < shapes.size(); ++i) {
      const auto& s = shapes[i];
      best[i] = std::max(best[i], gemm_rate(s[0], s[1], s[2], a.seconds_per_shape / kRounds));
    }
  }
  if (mpi) {
    // Every rank measured while the others did: their mean is what a rank gets.
    comm.all_reduce(best.data(), static_cast<int64_t>(best.size()), CommType::f64, ReduceOp::sum);
    for (double& b : best) b /= comm.size();
  }
  std::vector<GemmSample> samples;
  std::string record = "gemm = [\n";
  for (size_t i = 0; i < shapes.size(); ++i) {
    const auto& s = shapes[i];
    samples.push_back({static_cast<double>(s[0]), static_cast<double>(s[1]), static_cast<double>(s[2]), best[i]});
    if (first) fmt::print("  sgemm m={:<5} n={:<5} k={:<5} {:8.1f} GFLOP/s\n", s[0], s[1], s[2], best[i] / 1e9);
    record += fmt::format("  [{}, {}, {}, {:.4g}],\n", s[0], s[1], s[2], best[i] / 1e9);
  }
  record += "]  # m, n, k, GFLOP/s\n";
  const GemmFit fit = fit_gemm_curve(samples);
  double bw = triad_bandwidth(4 * a.seconds_per_shape);
  MpiLink link;
  if (mpi) {
    bw = comm.all_reduce_sum(bw) / comm.size();
    link = measure_mpi_link(comm, 2 * a.seconds_per_shape);
  }
  if (!first) return kExitOk;
  if (mpi) {
    fmt::print("  MPI ping-pong rank 0 <-> 1: latency {:.2f} us, bandwidth {:.2f} GB/s\n", link.alpha * 1e6, link.bw / 1e9);
  }
  fmt::print("  GEMM fit: {:.1f} GFLOP/s x f(m) f(n) f(k), half dim {:.0f} (rms error {:.1f}%)\n", fit.peak / 1e9,
             fit.half_dim, 100 * fit.rms_rel_error);
  fmt::print("  triad bandwidth {:.1f} GB/s\n", bw / 1e9);

  Cluster c;
  c.name = "local";
  c.gpu.name = fmt::format("cpu-{}-threads", threads);
  c.gpu.peak_flops_32 = fit.peak;
  c.gpu.memory_bytes = system_memory_bytes();
  c.gpu.hbm_bw = bw;
  // One node of `ranks` "GPUs"; without MPI the links are a shared-memory guess.
  const int ranks = mpi ? comm.size() : 1;
  c.node.gpus = ranks;
  c.node.package_gpus = 1;
  c.node.intra_bw = c.node.package_bw = mpi ? link.bw : bw / 2;
  c.node.nics = 1;
  c.node.nic_bw = (mpi ? link.bw : bw / 2) * ranks;  // per GPU: nic_bw * nics / gpus = the link
  c.eff.gemm_max = 1.0;  // the fitted rate is already what GEMMs achieve
  c.eff.gemm_half_dim = fit.half_dim;
  c.eff.hbm = 1.0;       // measured, not nominal
  c.eff.flash = 0.5;
  c.eff.intra_link = c.eff.inter_link = 1.0;
  c.eff.alpha_intra = c.eff.alpha_inter = mpi ? link.alpha : 2e-6;
  c.eff.kernel_overhead = 2e-6;
  c.stack.flash_attention = false;
  c.stack.dropout = false;  // tera's CPU runtime has no dropout
  c.memory.reserved_bytes = 0.25 * (1 << 30);
  c.memory.fragmentation = 0.05;
  const std::string header = fmt::format(
      "# This machine, measured by `tera calibrate` ({} threads{}, {}): fp32 GEMM rates fitted to\n"
      "# the planner's curve (peak_tflops_32 = the fitted asymptotic rate, gemm_max = 1), STREAM\n"
      "# triad bandwidth as hbm_tb_s, system memory as memory_gib. {}\n"
      "# Regenerate with: {}build/tera calibrate\n",
      threads, mpi ? fmt::format(" per rank, {} ranks", ranks) : "", cpu_backend().gemm_library,
      mpi ? "One MPI rank is one \"GPU\"; link bandwidth\n# and alpha_* from an MPI ping-pong between ranks 0 and 1 (mpi_measured = true below)."
          : "One process using every core\n# is one \"GPU\". Link bandwidths and alpha_* are placeholders until MPI is measured\n"
            "# (mpi_measured = false below; run under mpirun -n 2 to measure them).",
      mpi ? fmt::format("mpirun -n {} ", ranks) : "");
  std::string text = cluster_to_toml(c, header);
  text += fmt::format("\n[calibration]\nthreads = {}\nranks = {}\ngemm_fit_rms_rel_error = {:.4g}\ntriad_gb_s = {:.4g}\n"
                      "mpi_measured = {}\n{}{}",
                      threads, ranks, fit.rms_rel_error, bw / 1e9, mpi ? "true" : "false",
                      mpi ? fmt::format("mpi_latency_us = {:.4g}\nmpi_bandwidth_gb_s = {:.4g}\n", link.alpha * 1e6, link.bw / 1e9) : "",
                      record);
  // The preset must read back (same parser as every preset).
  if (auto back = parse_cluster_toml(text, a.out); !back.ok()) {
    print_error("calibrate produced an unreadable preset: " + back.error());
    return kExitFailure;
  }
  auto f = AtomicFile::create(a.out);
  if (!f.ok()) {
    print_error("--out " + a.out + ": " + f.error());
    return kExitBadInput;
  }
  Status st = f->write(text.data(), text.size());
  if (st) st = f->commit();
  if (!st) {
    print_error("--out " + a.out + ": " + st.message());
    return kExitFailure;
  }
  fmt::print("wrote {}\n", a.out);
  return kExitOk;
}

}  // namespace

Command add_calibrate_command(CLI::App& parent) {
  auto a = std::make_shared<CalibrateArgs>();
  a->out = config_dir() + "/clusters/local.toml";
  auto* sub = parent.add_subcommand("calibrate", "Measure this machine (GEMM rates, memory bandwidth) into the local cluster preset");
  sub->add_option("--out", a->out, "Where to write the preset")->capture_default_str();
  sub->add_option("--seconds", a->seconds_per_shape, "Measuring time per GEMM shape")->capture_default_str()
      ->check(CLI::PositiveNumber);
  return {sub, [a] { return run_calibrate(*a); }};
}

}  // namespace tera::cli
