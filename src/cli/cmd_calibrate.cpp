// `tera calibrate`: measures this machine into a `local` cluster preset: fp32
// GEMM rates over transformer-like shapes (fitted to the planner's GEMM
// efficiency curve) and streaming memory bandwidth. The preset models one
// process using every core as one "GPU". TODO (src/comm owner): MPI latency
// and bandwidth between local ranks for [node] and alpha_*; until then those
// keys hold shared-memory estimates and [calibration] says mpi_measured = false.
#include <CLI/CLI.hpp>
#include <fmt/format.h>
#include <omp.h>

#include <algorithm>
#include <fstream>
#include <memory>
#include <vector>

#include "cli/commands.h"
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

int run_calibrate(const CalibrateArgs& a) {
  const int threads = omp_get_max_threads();
  fmt::print("tera calibrate: {} threads, GEMM library {}\n", threads, cpu_backend().gemm_library);
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
  std::vector<GemmSample> samples;
  std::string record = "gemm = [\n";
  for (size_t i = 0; i < shapes.size(); ++i) {
    const auto& s = shapes[i];
    samples.push_back({static_cast<double>(s[0]), static_cast<double>(s[1]), static_cast<double>(s[2]), best[i]});
    fmt::print("  sgemm m={:<5} n={:<5} k={:<5} {:8.1f} GFLOP/s\n", s[0], s[1], s[2], best[i] / 1e9);
    record += fmt::format("  [{}, {}, {}, {:.4g}],\n", s[0], s[1], s[2], best[i] / 1e9);
  }
  record += "]  # m, n, k, GFLOP/s\n";
  const GemmFit fit = fit_gemm_curve(samples);
  const double bw = triad_bandwidth(4 * a.seconds_per_shape);
  fmt::print("  GEMM fit: {:.1f} GFLOP/s x f(m) f(n) f(k), half dim {:.0f} (rms error {:.1f}%)\n", fit.peak / 1e9,
             fit.half_dim, 100 * fit.rms_rel_error);
  fmt::print("  triad bandwidth {:.1f} GB/s\n", bw / 1e9);

  Cluster c;
  c.name = "local";
  c.gpu.name = fmt::format("cpu-{}-threads", threads);
  c.gpu.peak_flops_32 = fit.peak;
  c.gpu.memory_bytes = system_memory_bytes();
  c.gpu.hbm_bw = bw;
  c.node.gpus = 1;
  c.node.package_gpus = 1;
  c.node.intra_bw = c.node.package_bw = bw / 2;  // TODO(comm): MPI shared-memory bandwidth
  c.node.nics = 1;
  c.node.nic_bw = bw / 2;
  c.eff.gemm_max = 1.0;  // the fitted rate is already what GEMMs achieve
  c.eff.gemm_half_dim = fit.half_dim;
  c.eff.hbm = 1.0;       // measured, not nominal
  c.eff.flash = 0.5;
  c.eff.intra_link = c.eff.inter_link = 1.0;
  c.eff.alpha_intra = c.eff.alpha_inter = 2e-6;  // TODO(comm): MPI latency between local ranks
  c.eff.kernel_overhead = 2e-6;
  c.stack.flash_attention = false;
  c.stack.dropout = false;  // tera's CPU runtime has no dropout
  c.memory.reserved_bytes = 0.25 * (1 << 30);
  c.memory.fragmentation = 0.05;
  const std::string header = fmt::format(
      "# This machine, measured by `tera calibrate` ({} threads, {}): fp32 GEMM rates fitted to\n"
      "# the planner's curve (peak_tflops_32 = the fitted asymptotic rate, gemm_max = 1), STREAM\n"
      "# triad bandwidth as hbm_tb_s, system memory as memory_gib. One process using every core\n"
      "# is one \"GPU\". Link bandwidths and alpha_* are placeholders until MPI is measured\n"
      "# (mpi_measured = false below). Regenerate with: build/tera calibrate\n",
      threads, cpu_backend().gemm_library);
  std::string text = cluster_to_toml(c, header);
  text += fmt::format("\n[calibration]\nthreads = {}\ngemm_fit_rms_rel_error = {:.4g}\ntriad_gb_s = {:.4g}\n"
                      "mpi_measured = false\n{}",
                      threads, fit.rms_rel_error, bw / 1e9, record);
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
