// The CPU's bf16 flash attention (flash_attention_bf16.cpp) with each tile
// form this CPU runs selected in turn (tile_mac.h: AMX tiles, AVX512-BF16
// dot products, bf16 widened to fp32, portable loops), against fp64 within
// the conformance suite's derived bound (flash_bf16_bound.h, the bound of
// Conformance.FlashAttentionBf16*, which runs the form tera selects only).
// The shapes reach what the odd and tile shapes there do not: more query
// tiles than a group of stacked dK/dV products (kGroup = 4) with a partial
// last tile, a head size padded to whole AMX tiles, grouped heads, and a
// sequence of one tile of 64. The worst error must reach 1% of the bound
// in every form, so a form with fp32 products would fail.
#include <gtest/gtest.h>

#include <array>
#include <cmath>
#include <cstdio>
#include <random>
#include <vector>

#include "flash_bf16_bound.h"
#include "kernels/cpu/bf16.h"
#include "kernels/cpu/cpu_ops.h"
#include "kernels/cpu/tile_mac.h"

namespace tera::cpu {
namespace {

constexpr TileMacForm kForms[] = {TileMacForm::amx, TileMacForm::avx512_bf16, TileMacForm::avx512,
                                  TileMacForm::portable};
// {B, T, H, KV, hs}
constexpr std::array<std::array<int64_t, 5>, 3> kShapes = {{{1, 300, 2, 1, 64}, {2, 64, 2, 2, 40}, {1, 97, 4, 2, 24}}};

std::vector<double> bf16_normal(std::mt19937_64& gen, size_t n) {
  std::normal_distribution<double> d;
  std::vector<double> v(n);
  for (auto& x : v) x = from_bf16(to_bf16(static_cast<float>(d(gen))));
  return v;
}

TEST(FlashBf16Forms, EveryTileFormWithinTheDerivedBound) {
  const TileMacForm selected = tile_mac_bf16_selected();
  int forms_run = 0;
  for (TileMacForm form : kForms) {
    if (!tile_mac_form_available(form, true)) continue;
    ++forms_run;
    tile_mac_bf16_select(form);
    std::mt19937_64 gen(41);
    double worst_y = 0, worst_d = 0;
    for (auto [B, T, H, KV, hs] : kShapes) {
      const int64_t C = H * hs, W = (H + 2 * KV) * hs;
      const std::vector<double> qkv = bf16_normal(gen, static_cast<size_t>(B * T * W));
      std::vector<double> R(static_cast<size_t>(B * T * C));
      std::normal_distribution<double> d;
      for (auto& x : R) x = static_cast<float>(d(gen));
      std::vector<double> y(R.size()), lse(static_cast<size_t>(B * H * T)), dqkv(qkv.size());
      flash_attention_forward<double>(y.data(), lse.data(), qkv.data(), B, T, H, KV, hs);
      flash_attention_backward<double>(dqkv.data(), R.data(), qkv.data(), y.data(), lse.data(), B, T, H, KV, hs);
      const testing::FlashBf16Bounds tol = testing::flash_bf16_bounds(qkv, R, y, lse, B, T, H, KV, hs);
      std::vector<uint16_t> qb(qkv.size()), yb(y.size());
      for (size_t i = 0; i < qkv.size(); ++i) qb[i] = to_bf16(static_cast<float>(qkv[i]));
      std::vector<float> Rf(R.begin(), R.end()), yf(y.size()), lf(lse.size()), df(qkv.size(), NAN);
      flash_attention_forward_bf16(yf.data(), lf.data(), qb.data(), B, T, H, KV, hs);
      for (size_t i = 0; i < y.size(); ++i) {
        ASSERT_LE(std::abs(yf[i] - y[i]), tol.y[i]) << tile_mac_form_name(form, true) << " out " << i << ", T " << T;
        worst_y = std::max(worst_y, std::abs(yf[i] - y[i]) / tol.y[i]);
      }
      for (size_t i = 0; i < lse.size(); ++i) {
        ASSERT_LE(std::abs(lf[i] - lse[i]), tol.lse[i]) << tile_mac_form_name(form, true) << " lse " << i;
      }
      for (size_t i = 0; i < y.size(); ++i) yb[i] = to_bf16(yf[i]);  // the output as the model keeps it
      flash_attention_backward_bf16(df.data(), Rf.data(), qb.data(), yb.data(), lf.data(), B, T, H, KV, hs);
      for (size_t i = 0; i < dqkv.size(); ++i) {
        ASSERT_LE(std::abs(df[i] - dqkv[i]), tol.dqkv[i])
            << tile_mac_form_name(form, true) << " dqkv " << i << ", T " << T << ", hs " << hs;
        worst_d = std::max(worst_d, std::abs(df[i] - dqkv[i]) / tol.dqkv[i]);
      }
    }
    EXPECT_GT(worst_y, 0.01) << tile_mac_form_name(form, true) << ": out looks like fp32 products";
    EXPECT_GT(worst_d, 0.01) << tile_mac_form_name(form, true) << ": dqkv looks like fp32 products";
    std::printf("%s: worst error / bound, out %.3f, dqkv %.3f\n", tile_mac_form_name(form, true), worst_y, worst_d);
  }
  tile_mac_bf16_select(selected);
  EXPECT_GE(forms_run, 1);
}

}  // namespace
}  // namespace tera::cpu
