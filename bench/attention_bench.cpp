// Attention, naive against flash, side by side in one run: the time of one
// forward + backward of causal attention over GPT-2 124M's heads (12 heads of
// 64, micro-batch 4 by default) at several sequence lengths, and the bytes
// each keeps per layer for backward (naive: the probabilities [B,H,T,T];
// flash: the row log-sum-exp [B,H,T]). All run on the cpu backend on the
// same inputs: naive and flash in fp32, and flash with bf16 operands
// (train.precision = "bf16": flash_attention_*_bf16) once per bf16 tile
// form this CPU runs (tile_mac.h: AMX tiles, AVX512-BF16 dot products, bf16
// widened to fp32 FMA; --forms picks), the one tera selects marked with *.
// GFLOP/s count the causal products that flash computes: 2 in the forward,
// 5 in the backward (S recomputed, dP, dV, dK, dQ), each 2 hs FLOPs per
// (query, key <= query) pair. Median of --repeats runs after one warm-up.
// Prints a table, then one JSON line.
#include <omp.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <fmt/format.h>
#include <fstream>
#include <functional>
#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "bench_common.h"
#include "kernels/backend.h"
#include "kernels/cpu/cpu_features.h"
#include "kernels/cpu/tile_mac.h"
#include "kernels/device_buffer.h"

using namespace tera;

using bench::cpu_model;
using bench::median_seconds;

int main(int argc, char** argv) {
  CLI::App app{"naive vs flash attention: forward + backward time and saved bytes"};
  int64_t B = 4, H = 12, hs = 64;
  int repeats = 3;
  bool naive = true;
  std::vector<int64_t> seqs = {256, 1024, 2048};
  const std::map<std::string, cpu::TileMacForm> names = {{"amx", cpu::TileMacForm::amx},
                                                         {"avx512_bf16", cpu::TileMacForm::avx512_bf16},
                                                         {"avx512", cpu::TileMacForm::avx512},
                                                         {"portable", cpu::TileMacForm::portable}};
  std::vector<std::string> form_names = {"amx", "avx512_bf16", "avx512"};
  app.add_option("--batch", B)->capture_default_str();
  app.add_option("--heads", H)->capture_default_str();
  app.add_option("--head-size", hs)->capture_default_str();
  app.add_option("--seq", seqs, "sequence lengths")->capture_default_str();
  app.add_option("--repeats", repeats)->capture_default_str();
  app.add_option("--forms", form_names, "bf16 tile forms to time (those this CPU runs)")
      ->check(CLI::IsMember({"amx", "avx512_bf16", "avx512", "portable"}))
      ->capture_default_str();
  app.add_flag("!--no-naive", naive, "skip naive attention (its probabilities are B H T^2 floats)");
  CLI11_PARSE(app, argc, argv);
  const Backend& be = cpu_backend();
  const cpu::TileMacForm chosen = cpu::tile_mac_bf16_selected();
  std::vector<cpu::TileMacForm> forms;
  for (const std::string& n : form_names) {
    if (cpu::tile_mac_form_available(names.at(n), true)) forms.push_back(names.at(n));
  }
  const cpu::CpuFeatures& f = cpu::cpu_features();
  fmt::print("{} (avx512 {}, avx512_bf16 {}, amx_bf16 {}), {} threads; B {}, {} heads of {}, forward + backward\n",
             cpu_model(), f.avx512, f.avx512_bf16, f.amx_bf16, omp_get_max_threads(), B, H, hs);
  fmt::print("{:>6} {:>10} {:>10} {:>8}", "T", "naive ms", "flash ms", "GFLOP/s");
  for (cpu::TileMacForm form : forms) {
    fmt::print("  {:>34}", fmt::format("bf16, {}{} ms, GFLOP/s", cpu::tile_mac_form_name(form, true),
                                       form == chosen ? "*" : ""));
  }
  fmt::print(" {:>14} {:>12}\n", "naive saved", "flash saved");
  nlohmann::json rows = nlohmann::json::array();
  for (int64_t T : seqs) {
    const int64_t W = 3 * H * hs, C = H * hs;
    std::vector<float> host(static_cast<size_t>(B * T * W));
    for (size_t i = 0; i < host.size(); ++i) host[i] = static_cast<float>(static_cast<int>(i % 23) - 11) / 16.0f;
    const DeviceBuffer<float> qkv(be, host), dqkv(be, B * T * W), out(be, B * T * C), dout(be, std::vector<float>(
                                                                                                  static_cast<size_t>(B * T * C), 0.01f));
    double naive_s = 0;
    if (naive) {
      const DeviceBuffer<float> probs(be, B * H * T * T);
      naive_s = median_seconds(repeats, [&] {
        be.attention_forward(out.get(), probs.get(), qkv.get(), B, T, H, H, hs);
        be.attention_backward(dqkv.get(), dout.get(), qkv.get(), probs.get(), B, T, H, H, hs);
      });
    }
    const DeviceBuffer<float> lse(be, B * H * T);
    const double flash_s = median_seconds(repeats, [&] {
      be.flash_attention_forward(out.get(), lse.get(), qkv.get(), B, T, H, H, hs);
      be.flash_attention_backward(dqkv.get(), dout.get(), qkv.get(), out.get(), lse.get(), B, T, H, H, hs);
    });
    // qkv and the output in bf16 as train.precision = "bf16" keeps them (the output's rounding timed too).
    const DeviceBuffer<uint16_t> qkv_bf16(be, B * T * W), out_bf16(be, B * T * C);
    be.cast(qkv_bf16.get(), DType::bf16, qkv.get(), DType::f32, B * T * W);
    const double flops = 7.0 * 2.0 * hs * static_cast<double>(B * H) * static_cast<double>(T * (T + 1) / 2);
    const int64_t naive_bytes = B * H * T * T * 4, flash_bytes = B * H * T * 4;
    fmt::print("{:>6} {:>10.1f} {:>10.1f} {:>8.0f}", T, naive_s * 1e3, flash_s * 1e3, flops / flash_s * 1e-9);
    nlohmann::json row = {{"T", T}, {"naive_ms", naive_s * 1e3}, {"flash_ms", flash_s * 1e3},
                          {"flash_gflops", flops / flash_s * 1e-9}, {"naive_saved_bytes", naive_bytes},
                          {"flash_saved_bytes", flash_bytes}, {"bf16", nlohmann::json::array()}};
    for (cpu::TileMacForm form : forms) {
      cpu::tile_mac_bf16_select(form);
      const double bf16_s = median_seconds(repeats, [&] {
        be.flash_attention_forward_bf16(out.get(), lse.get(), qkv_bf16.get(), B, T, H, H, hs);
        be.cast(out_bf16.get(), DType::bf16, out.get(), DType::f32, B * T * C);
        be.flash_attention_backward_bf16(dqkv.get(), dout.get(), qkv_bf16.get(), out_bf16.get(), lse.get(), B, T, H,
                                         H, hs);
      });
      fmt::print("  {:>34}", fmt::format("{:.1f}, {:.0f}", bf16_s * 1e3, flops / bf16_s * 1e-9));
      row["bf16"].push_back({{"form", cpu::tile_mac_form_name(form, true)}, {"selected", form == chosen},
                             {"ms", bf16_s * 1e3}, {"gflops", flops / bf16_s * 1e-9}});
    }
    cpu::tile_mac_bf16_select(chosen);
    fmt::print(" {:>10.1f} MiB {:>8.1f} KiB\n", naive_bytes / 1048576.0, flash_bytes / 1024.0);
    rows.push_back(row);
  }
  fmt::print("{}\n", nlohmann::json{{"cpu", cpu_model()}, {"threads", omp_get_max_threads()}, {"B", B}, {"H", H},
                                    {"hs", hs}, {"bf16_path", cpu::tile_mac_bf16_path()}, {"rows", rows}}.dump());
  return 0;
}
