// GEMM throughput, fp32 (dnnl_sgemm) against bf16 inputs with fp32
// accumulation (kernels/cpu/gemm_bf16.cpp), side by side in one run on the
// same shapes: square products and the GPT-2 124M linear layers of one
// micro-batch (tokens x in -> out, forward layout y = x W^T). Reports GFLOP/s
// (2 M N K per product, median of --repeats after a warm-up), the ratio, the
// CPU model, its bf16/AMX flags and the path the bf16 product takes. The
// operands are the same values (rounded to bf16 for the bf16 side). Prints a
// table, then one JSON line. Evidence for issue 17's bf16 default; never a
// timing assertion in a test.
#include <omp.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <cstring>
#include <fmt/format.h>
#include <fstream>
#include <functional>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <vector>

#include "bench_common.h"
#include "kernels/cpu/cpu_ops.h"

using namespace tera;

using bench::median_seconds;

namespace {

// "model name" and the bf16/AMX flags of /proc/cpuinfo.
std::pair<std::string, std::string> cpu_info() {
  std::ifstream f("/proc/cpuinfo");
  std::string line, model = "unknown", flags;
  while (std::getline(f, line)) {
    if (line.rfind("model name", 0) == 0 && model == "unknown") model = line.substr(line.find(':') + 2);
    if (line.rfind("flags", 0) == 0 && flags.empty()) {
      std::istringstream in(line.substr(line.find(':') + 1));
      std::string flag;
      while (in >> flag) {
        if (flag == "avx512_bf16" || flag.rfind("amx", 0) == 0 || flag == "avx512f") flags += (flags.empty() ? "" : " ") + flag;
      }
    }
  }
  return {model, flags.empty() ? "none of avx512f, avx512_bf16, amx" : flags};
}

uint16_t to_bf16(float f) {
  uint32_t u;
  std::memcpy(&u, &f, sizeof u);
  u += 0x7fff + ((u >> 16) & 1);
  return static_cast<uint16_t>(u >> 16);
}

struct GemmShape {
  std::string name;
  int64_t M, N, K;
};

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"GEMM throughput: fp32 against bf16 inputs with fp32 accumulation"};
  int repeats = 5;
  int64_t tokens = 256;  // GPT-2 124M, micro-batch 4 x seq 64
  app.add_option("--repeats", repeats)->capture_default_str();
  app.add_option("--tokens", tokens, "rows of the GPT-2 layer products (micro-batch x seq)")->capture_default_str();
  CLI11_PARSE(app, argc, argv);
  const std::vector<GemmShape> shapes = {
      {"square 512", 512, 512, 512},
      {"square 1024", 1024, 1024, 1024},
      {"square 2048", 2048, 2048, 2048},
      {"gpt2 qkv", tokens, 2304, 768},
      {"gpt2 fc", tokens, 3072, 768},
      {"gpt2 proj", tokens, 768, 3072},
      {"gpt2 head", tokens, 50304, 768},
  };
  const auto [model, flags] = cpu_info();
  fmt::print("{} ({}), {} threads; bf16 path: {}\n", model, flags, omp_get_max_threads(), cpu::gemm_bf16_path());
  fmt::print("{:<12} {:>6} {:>6} {:>6} {:>12} {:>12} {:>8}\n", "shape", "M", "N", "K", "fp32 GF/s", "bf16 GF/s", "ratio");
  nlohmann::json rows = nlohmann::json::array();
  for (const GemmShape& s : shapes) {
    std::vector<float> a(static_cast<size_t>(s.M * s.K)), b(static_cast<size_t>(s.N * s.K)), c(static_cast<size_t>(s.M * s.N));
    for (size_t i = 0; i < a.size(); ++i) a[i] = static_cast<float>(static_cast<int>(i % 29) - 14) / 32.0f;
    for (size_t i = 0; i < b.size(); ++i) b[i] = static_cast<float>(static_cast<int>(i % 31) - 15) / 32.0f;
    std::vector<uint16_t> a16(a.size()), b16(b.size());
    for (size_t i = 0; i < a.size(); ++i) a16[i] = to_bf16(a[i]);
    for (size_t i = 0; i < b.size(); ++i) b16[i] = to_bf16(b[i]);
    // y[M, N] = x[M, K] W[N, K]^T: the forward of a linear layer.
    const double f32 = median_seconds(repeats, [&] {
      cpu::gemm<float>(false, true, s.M, s.N, s.K, 1.0f, a.data(), s.K, b.data(), s.K, 0.0f, c.data(), s.N);
    });
    const double bf = median_seconds(repeats, [&] {
      cpu::gemm_bf16(false, true, s.M, s.N, s.K, 1.0f, a16.data(), s.K, b16.data(), s.K, 0.0f, c.data(), s.N);
    });
    const double flop = 2.0 * static_cast<double>(s.M) * static_cast<double>(s.N) * static_cast<double>(s.K);
    fmt::print("{:<12} {:>6} {:>6} {:>6} {:>12.1f} {:>12.1f} {:>8.2f}\n", s.name, s.M, s.N, s.K, flop / f32 / 1e9,
               flop / bf / 1e9, f32 / bf);
    rows.push_back({{"shape", s.name}, {"M", s.M}, {"N", s.N}, {"K", s.K}, {"fp32_gflops", flop / f32 / 1e9},
                    {"bf16_gflops", flop / bf / 1e9}, {"bf16_speedup", f32 / bf}});
  }
  fmt::print("{}\n", nlohmann::json{{"cpu", model}, {"flags", flags}, {"threads", omp_get_max_threads()},
                                    {"bf16_path", cpu::gemm_bf16_path()}, {"rows", rows}}
                         .dump());
  return 0;
}
