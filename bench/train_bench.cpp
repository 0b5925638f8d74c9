// Training-step throughput, tera against the PyTorch reference, in one run.
// Both train the same GPT-2 shape (default: GPT-2 124M, micro-batch 4, seq 64)
// with AdamW + clipping for the same number of steps, in each --precision
// (default fp32 and bf16: tera's train.precision = "bf16", PyTorch's
// torch.autocast("cpu", dtype=torch.bfloat16)); we print the median tokens/s
// of each, their ratios, tera's achieved GFLOP/s against the machine's fp32
// peak, the measured GEMM rate and the GEMM kernel paths.
//
// FLOPs per token: ModelSpec::train_flops_per_token (Megatron's convention:
// 3 x forward matmul FLOPs, forward per layer 2*(3C^2 + C^2 + 2CF) + 4TC,
// head 2CV). Peak: --peak-gflops (default 448 = 2 cores x 2 AVX-512 FMA
// units x 16 lanes x 2 FLOPs x 3.5 GHz, the figure measured for this machine).
//
// --backend cuda (scripts/device-check on a GPU node) times tera alone on the
// GPU (PyTorch runs there from scripts/device_check_torch.py on the same
// shapes) and --peak-gflops is then the GPU's dense bf16 peak, so the
// percentage printed is the model FLOPs utilisation (MFU); --json writes the
// numbers for the device check's report.
//
// PyTorch runs in the best configuration found on this machine: OpenBLAS's
// AVX-512 kernels (OPENBLAS_CORETYPE=SkylakeX, set for that command alone),
// its OpenMP build so BLAS and torch share one thread pool, and tcmalloc,
// which keeps freed memory instead of returning it to the OS every step.
#include <omp.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fmt/format.h>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>

#include "config/config.h"
#include "core/timer.h"
#include "kernels/cpu/cpu_ops.h"
#include "kernels/backend_registry.h"
#include "kernels/profiling_backend.h"
#include "train/trainer.h"

using namespace tera;

namespace {

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

// Best-of-5 sgemm rate on a square-ish shape representative of the step.
double measured_gemm_gflops(int64_t M, int64_t N, int64_t K) {
  std::vector<float> A(static_cast<size_t>(M * K), 0.01f), B(static_cast<size_t>(K * N), 0.02f),
      C(static_cast<size_t>(M * N));
  double best = 1e30;
  for (int r = 0; r < 6; ++r) {
    Stopwatch sw;
    cpu_backend().gemm(false, true, M, N, K, 1.0f, A.data(), K, B.data(), K, 0.0f, C.data(), N);
    if (r > 0) best = std::min(best, sw.seconds());
  }
  return 2.0 * static_cast<double>(M) * static_cast<double>(N) * static_cast<double>(K) / best / 1e9;
}

std::string find_tcmalloc() {
  for (const char* p : {"/usr/lib/x86_64-linux-gnu/libtcmalloc_minimal.so.4", "/usr/lib/x86_64-linux-gnu/libtcmalloc.so.4"}) {
    if (std::filesystem::exists(p)) return p;
  }
  return "";
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"tera training-step benchmark (tera vs PyTorch, same shape, one invocation)"};
  int64_t layers = 12, hidden = 768, heads = 12, vocab = 50257, seq = 64, batch = 4, steps = 10, warmup = 2;
  double peak = 448.0;
  bool no_pytorch = false, profile = false;
  std::string script = std::string(TERA_SOURCE_DIR) + "/bench/pytorch_gpt2_step.py";
  std::string backend_name = "cpu", json_path;
  app.add_option("--layers", layers)->capture_default_str();
  app.add_option("--hidden", hidden)->capture_default_str();
  app.add_option("--heads", heads)->capture_default_str();
  app.add_option("--vocab", vocab)->capture_default_str();
  app.add_option("--seq", seq)->capture_default_str();
  app.add_option("--batch", batch, "micro-batch = global batch")->capture_default_str();
  app.add_option("--steps", steps, "timed steps")->capture_default_str();
  app.add_option("--warmup", warmup, "untimed steps first")->capture_default_str();
  app.add_option("--peak-gflops", peak, "peak of this machine: fp32 on a CPU, dense bf16 on a GPU (MFU)")
      ->capture_default_str();
  app.add_flag("--no-pytorch", no_pytorch, "measure tera only");
  app.add_flag("--profile", profile, "time every op of tera's timed steps (adds a little overhead)");
  app.add_option("--pytorch-script", script)->capture_default_str();
  app.add_option("--backend", backend_name, "tera's backend (cpu, or cuda on a GPU node: tera alone, no PyTorch)")
      ->capture_default_str();
  app.add_option("--json", json_path, "also write the results as JSON to this file");
  std::vector<std::string> precisions = {"fp32", "bf16"};
  app.add_option("--precision", precisions, "train.precision values to measure, side by side (tera and PyTorch)")
      ->check(CLI::IsMember({"fp32", "bf16"}))
      ->capture_default_str();
  CLI11_PARSE(app, argc, argv);
  auto made = make_backend(backend_name);
  if (!made) {
    fmt::print(stderr, "--backend {}: {}\n", backend_name, made.error());
    return 2;
  }
  const std::unique_ptr<Backend> chosen = std::move(*made);
  const bool on_cpu = backend_name == "cpu";
  if (!on_cpu) no_pytorch = true;
  nlohmann::json report = {{"backend", backend_name}, {"layers", layers}, {"hidden", hidden}, {"heads", heads},
                           {"vocab", vocab}, {"seq", seq}, {"micro_batch", batch}, {"peak_gflops", peak},
                           {"runs", nlohmann::json::array()}};
  const auto write_json = [&] {
    if (json_path.empty()) return;
    std::ofstream f(json_path);
    f << report.dump(1) << "\n";
    if (!f) fmt::print(stderr, "cannot write {}\n", json_path);
  };

  // A synthetic corpus: tokens are bytes, the compute is the same for any text.
  const std::string corpus = (std::filesystem::temp_directory_path() / "tera_bench_corpus.txt").string();
  {
    std::ofstream f(corpus, std::ios::binary);
    for (int64_t i = 0; i < (int64_t{1} << 20); ++i) f.put(static_cast<char>(32 + (i * 7919) % 95));
  }
  const std::string toml = fmt::format(
      "[model]\nlayers = {}\nhidden = {}\nheads = {}\nseq_len = {}\nvocab = {}\n"
      "[train]\nsteps = {}\nmicro_batch = {}\nglobal_batch = {}\nlr = 3e-4\nclip = 1.0\neval_sequences = 4\n"
      "[data]\ntrain = \"{}\"\n[out]\ndir = \"/tmp/tera_bench_out\"\n",
      layers, hidden, heads, seq, vocab, warmup + steps + 1, batch, batch, corpus);
  // tera in each precision, one after the other in this process (same data, same shape).
  std::vector<double> tera_tps;
  for (const std::string& precision : precisions) {
    auto run_cfg = parse_run_config(toml, "bench", {"train.precision=" + precision});
    if (!run_cfg) {
      fmt::print(stderr, "{}\n", run_cfg.error());
      return 2;
    }
    const std::unique_ptr<Backend> profiled = profile ? make_profiling_backend(*chosen) : nullptr;
    const Backend& be = profile ? *profiled : *chosen;
    auto tr = Trainer::create(*run_cfg, be);
    if (!tr) {
      fmt::print(stderr, "{}\n", tr.error());
      return 2;
    }
    const ModelSpec& spec = (*tr)->spec();
    const double flops_per_token = spec.train_flops_per_token();
    if (tera_tps.empty()) {
      report["parameters"] = spec.num_params();
      report["flops_per_token"] = flops_per_token;
      fmt::print("backend: {}\n", be.name);
      fmt::print("shape: GPT {} layers, hidden {}, {} heads, vocab {}, seq {}, micro-batch {} = {:.1f}M parameters, "
                 "{} threads\n",
                 layers, hidden, heads, vocab, seq, batch, static_cast<double>(spec.num_params()) / 1e6,
                 omp_get_max_threads());
      fmt::print("FLOPs per token (train, Megatron convention): {:.1f} MFLOP\n", flops_per_token / 1e6);
    }
    std::vector<double> rates;
    double step_seconds = 0;
    for (int64_t s = 0; s < warmup + steps; ++s) {
      if (s == warmup && profile) profiling_reset(be);
      const StepStats st = (*tr)->step();
      if (s >= warmup) {
        rates.push_back(st.tokens_per_s);
        step_seconds += st.seconds;
      }
    }
    if (profile) fmt::print("{}{:<26} {:>8} {:>10.1f}\n", profiling_report(be), "step total", "", step_seconds * 1e3);
    tera_tps.push_back(median(rates));
    const double gflops = tera_tps.back() * flops_per_token / 1e9;
    fmt::print("tera {}: median {:.1f} tokens/s over {} steps ({:.0f} .. {:.0f}); {:.1f} GFLOP/s", precision,
               tera_tps.back(), rates.size(), *std::min_element(rates.begin(), rates.end()),
               *std::max_element(rates.begin(), rates.end()), gflops);
    if (peak > 0) {
      fmt::print(" = {:.1f}% of the {} peak ({:.0f})", 100 * gflops / peak, on_cpu ? "fp32" : "dense bf16 (MFU)", peak);
    }
    fmt::print("\n");
    report["runs"].push_back({{"precision", precision}, {"tokens_per_s", tera_tps.back()},
                              {"tokens_per_s_min", *std::min_element(rates.begin(), rates.end())},
                              {"tokens_per_s_max", *std::max_element(rates.begin(), rates.end())},
                              {"steps", rates.size()}, {"gflops", gflops}});
    if (peak > 0) report["runs"].back()["fraction_of_peak"] = gflops / peak;
  }
  if (!on_cpu) {
    write_json();
    return 0;
  }
  const double gemm = measured_gemm_gflops(batch * seq, 3 * hidden, hidden);
  const double gemm_big = measured_gemm_gflops(2048, 2048, 2048);
  fmt::print("GEMM: fp32 by {} ({} kernels): {:.0f} GFLOP/s at {}x{}x{}, {:.0f} at 2048^3; bf16 by {}\n",
             cpu_backend().gemm_library, cpu::gemm_isa_name(), gemm, batch * seq, 3 * hidden, hidden, gemm_big,
             cpu::gemm_bf16_path());

  if (no_pytorch) {
    write_json();
    return 0;
  }
  const std::string tc = find_tcmalloc();
  const std::string env =
      std::string("OPENBLAS_CORETYPE=SkylakeX LD_LIBRARY_PATH=/usr/lib/x86_64-linux-gnu/openblas-openmp ") +
      (tc.empty() ? "" : "LD_PRELOAD=" + tc + " ");
  std::vector<double> torch_tps;
  for (const std::string& precision : precisions) {
    // PyTorch's bf16: torch.autocast("cpu", dtype=torch.bfloat16) around the forward.
    const std::string cmd = fmt::format("env {} /usr/bin/python3 {} {} {} {} {} {} {} {} {} {} {}", env, script,
                                        layers, hidden, heads, vocab, seq, batch, steps, warmup, omp_get_max_threads(),
                                        precision);
    fmt::print("pytorch: {}\n", cmd);
    std::fflush(stdout);
    FILE* p = popen(cmd.c_str(), "r");
    std::string out;
    char buf[4096];
    while (p != nullptr && std::fgets(buf, sizeof(buf), p) != nullptr) out += buf;
    const int rc = p != nullptr ? pclose(p) : -1;
    nlohmann::json j;
    try {
      j = nlohmann::json::parse(out.substr(out.rfind('{')));
    } catch (...) {
      fmt::print(stderr, "pytorch reference failed (exit {}): {}\n", rc, out);
      return 1;
    }
    torch_tps.push_back(j["median"].get<double>());
    fmt::print("pytorch {}: median {:.1f} tokens/s (torch {}, {} threads{})\n", precision, torch_tps.back(),
               j["torch"].get<std::string>(), j["threads"].get<int>(), tc.empty() ? ", tcmalloc not found" : ", tcmalloc");
  }
  for (size_t k = 0; k < precisions.size(); ++k) {
    report["runs"][k]["pytorch_tokens_per_s"] = torch_tps[k];
    fmt::print("ratio {}: tera / pytorch = {:.2f}x", precisions[k], tera_tps[k] / torch_tps[k]);
    if (k > 0) fmt::print("; tera {} / tera {} = {:.2f}x", precisions[k], precisions[0], tera_tps[k] / tera_tps[0]);
    fmt::print("\n");
  }
  write_json();
  return 0;
}
