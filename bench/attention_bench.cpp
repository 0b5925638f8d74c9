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
//
// --block: ring attention's block kernels instead (context parallelism over
// --cp ranks, the load-balanced split: rank r holds chunks r and 2cp-1-r of
// T/(2cp) tokens), on rank 0's share at each length: its own block (causal
// within its chunks) and the cp - 1 blocks the ring passes it (at cp = 2
// rank 1's, of which chunk 0's queries see nothing and chunk 3's see all),
// forward + backward. The cpu backend's tiled kernels against the scalar
// template instantiated for float (--no-scalar skips it) and against the
// full-sequence flash kernels at T over cp (every rank does an equal share
// of the same causal work). GFLOP/s count the pairs seen, as above.
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
#include "kernels/cpu/cpu_ops.h"
#include "kernels/cpu/tile_mac.h"
#include "kernels/device_buffer.h"

using namespace tera;

using bench::cpu_model;
using bench::median_seconds;

namespace {

// Rank 0's blocks at sequence T over cp ranks: returns the rows of the table and JSON.
nlohmann::json block_bench(const Backend& be, int64_t B, int64_t H, int64_t hs, int64_t T, int64_t cp, int repeats,
                           bool scalar) {
  const int64_t Tc = T / (2 * cp), L = 2 * Tc, W = 3 * H * hs, Wk = 2 * H * hs, C = H * hs;
  auto positions = [&](int64_t r) {  // global positions of rank r's local tokens
    std::vector<int32_t> p(static_cast<size_t>(L));
    for (int64_t i = 0; i < L; ++i) p[i] = static_cast<int32_t>(i < Tc ? r * Tc + i : (2 * cp - 1 - r) * Tc + i - Tc);
    return p;
  };
  std::vector<float> host(static_cast<size_t>(B * L * W));
  for (size_t i = 0; i < host.size(); ++i) host[i] = static_cast<float>(static_cast<int>(i % 23) - 11) / 16.0f;
  const std::vector<float> host_kv(host.begin(), host.begin() + B * L * Wk);  // any values of the right size
  const std::vector<int32_t> pq = positions(0);
  const DeviceBuffer<float> qkv(be, host), kv(be, host_kv), dqkv(be, B * L * W), dkv(be, B * L * Wk),
      out(be, B * L * C), lse(be, B * H * L), dout(be, std::vector<float>(static_cast<size_t>(B * L * C), 0.01f));
  // Rank 0 meets its own block first (accumulate off), then rank (0 - i) mod cp's.
  std::vector<std::vector<int32_t>> pk;
  for (int64_t i = 0; i < cp; ++i) pk.push_back(positions((cp - i) % cp));
  auto time_blocks = [&](int64_t first, int64_t last, auto forward, auto backward) {
    return median_seconds(repeats, [&] {
      for (int64_t i = first; i < last; ++i) {
        forward(out.get(), lse.get(), qkv.get(), kv.get(), pq.data(), pk[i].data(), B, L, L, H, H, hs, i > 0);
      }
      for (int64_t i = first; i < last; ++i) {
        backward(dqkv.get(), dkv.get(), dout.get(), qkv.get(), kv.get(), out.get(), lse.get(), pq.data(),
                 pk[i].data(), B, L, L, H, H, hs);
      }
    });
  };
  // The tiled kernels are what the cpu backend runs; called directly, like the scalar ones.
  const auto tiled_f = cpu::flash_attention_block_forward_f32;
  const auto tiled_b = cpu::flash_attention_block_backward_f32;
  const double own = time_blocks(0, 1, tiled_f, tiled_b), rest = time_blocks(1, cp, tiled_f, tiled_b);
  double own_scalar = 0, rest_scalar = 0;
  if (scalar) {
    own_scalar = time_blocks(0, 1, cpu::flash_attention_block_forward<float>, cpu::flash_attention_block_backward<float>);
    rest_scalar = time_blocks(1, cp, cpu::flash_attention_block_forward<float>, cpu::flash_attention_block_backward<float>);
  }
  // The full sequence on the flash kernels: T tokens, every rank's share of it.
  std::vector<float> full(static_cast<size_t>(B * T * W));
  for (size_t i = 0; i < full.size(); ++i) full[i] = static_cast<float>(static_cast<int>(i % 23) - 11) / 16.0f;
  const DeviceBuffer<float> fqkv(be, full), fdqkv(be, B * T * W), fout(be, B * T * C), flse(be, B * H * T),
      fdout(be, std::vector<float>(static_cast<size_t>(B * T * C), 0.01f));
  const double flash = median_seconds(repeats, [&] {
    be.flash_attention_forward(fout.get(), flse.get(), fqkv.get(), B, T, H, H, hs);
    be.flash_attention_backward(fdqkv.get(), fdout.get(), fqkv.get(), fout.get(), flse.get(), B, T, H, H, hs);
  }) / static_cast<double>(cp);
  int64_t pairs = 0;  // (query, key) pairs rank 0 computes
  for (const auto& p : pk) {
    for (int32_t a : pq) pairs += std::count_if(p.begin(), p.end(), [&](int32_t b) { return b <= a; });
  }
  const double gflop = 7.0 * 2.0 * hs * static_cast<double>(B * H) * static_cast<double>(pairs) * 1e-9;
  const double tiled = own + rest, scalar_s = own_scalar + rest_scalar;
  fmt::print("{:>6} {:>3} {:>9.1f} {:>9.1f} {:>10.1f} {:>10.1f} {:>9.1f} {:>8.0f} {:>11.1f} {:>8.2f} {:>9.1f}\n", T, cp,
             own * 1e3, rest * 1e3, own_scalar * 1e3, rest_scalar * 1e3, tiled * 1e3, gflop / tiled, flash * 1e3,
             tiled / flash, scalar ? scalar_s / tiled : 0.0);
  return {{"T", T}, {"cp", cp}, {"own_ms", own * 1e3}, {"rest_ms", rest * 1e3}, {"own_scalar_ms", own_scalar * 1e3},
          {"rest_scalar_ms", rest_scalar * 1e3}, {"tiled_gflops", gflop / tiled}, {"flash_share_ms", flash * 1e3},
          {"tiled_over_flash", tiled / flash}, {"speedup_over_scalar", scalar ? scalar_s / tiled : 0.0}};
}

}  // namespace

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
  bool block = false, scalar = true;
  int64_t cp = 2;
  app.add_flag("--block", block, "time ring attention's block kernels on one rank's share instead");
  app.add_option("--cp", cp, "--block: context-parallel ranks (2 cp divides every --seq)")->capture_default_str();
  app.add_flag("!--no-scalar", scalar, "--block: skip the scalar kernels");
  CLI11_PARSE(app, argc, argv);
  const Backend& be = cpu_backend();
  if (block) {
    for (int64_t T : seqs) {
      if (T % (2 * cp) != 0) {
        fmt::print(stderr, "--seq {} is not a multiple of 2 cp = {}\n", T, 2 * cp);
        return 1;
      }
    }
    fmt::print("{}, {} threads; B {}, {} heads of {}; rank 0 of cp, forward + backward; ms\n", cpu_model(),
               omp_get_max_threads(), B, H, hs);
    fmt::print("{:>6} {:>3} {:>9} {:>9} {:>10} {:>10} {:>9} {:>8} {:>11} {:>8} {:>9}\n", "T", "cp", "own", "rest",
               "own scal.", "rest scal.", "tiled", "GFLOP/s", "flash T/cp", "t/flash", "scal./t");
    nlohmann::json rows = nlohmann::json::array();
    for (int64_t T : seqs) rows.push_back(block_bench(be, B, H, hs, T, cp, repeats, scalar));
    fmt::print("{}\n", nlohmann::json{{"cpu", cpu_model()}, {"threads", omp_get_max_threads()}, {"B", B}, {"H", H},
                                      {"hs", hs}, {"block_rows", rows}}.dump());
    return 0;
  }
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
