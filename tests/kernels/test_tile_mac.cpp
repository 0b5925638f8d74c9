// The tile multiply-accumulate of the CPU flash attention (tile_mac.h), every
// form this CPU can run, against fp64 on sizes that leave remainders in rows
// (blocks of 4; AMX: tiles of 16, blocks of 32), columns (vectors and tiles
// of 16, blocks of 64 or 32) and the contraction (AMX: steps of 16 pairs,
// the rest on AVX-512), and the run-time choice of the form.
// Bound: the inputs are exact in the form's precision (bf16 inputs are bf16
// values, whose products are exact in fp32), so only the fp32 accumulation
// of K terms onto C rounds: |err| <= (K + 2) 2^-24 (|C0| + sum |a b|).
#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <vector>

#include "kernels/cpu/bf16.h"
#include "kernels/cpu/tile_mac.h"

namespace tera::cpu {
namespace {

constexpr double kEps32 = 5.96e-8;
constexpr TileMacForm kForms[] = {TileMacForm::portable, TileMacForm::avx512, TileMacForm::avx512_bf16,
                                   TileMacForm::amx};

struct Case {
  int64_t M, N, K;
};
constexpr Case kCases[] = {{1, 1, 1},    {7, 37, 13},   {4, 64, 64},  {9, 130, 67}, {64, 67, 64},
                           {64, 64, 64}, {16, 16, 32},  {17, 33, 96}, {48, 80, 35}, {33, 17, 130}};

TEST(TileMac, Fp32FormsMatchFp64) {
  std::mt19937 gen(7);
  std::normal_distribution<float> d;
  for (TileMacForm form : kForms) {
    if (!tile_mac_form_available(form, false)) continue;
    for (auto [M, N, K] : kCases) {
      const int64_t lda = K + 3, ldb = N + 5, ldc = N + 2;  // leading dimensions wider than the tile
      std::vector<float> A(M * lda), Bm(K * ldb), Cm(M * ldc);
      for (auto* v : {&A, &Bm, &Cm}) for (auto& x : *v) x = d(gen);
      std::vector<float> C0 = Cm;
      tile_mac_f32_form(form, Cm.data(), ldc, A.data(), lda, Bm.data(), ldb, M, N, K);
      for (int64_t m = 0; m < M; ++m) {
        for (int64_t n = 0; n < ldc; ++n) {
          if (n >= N) {  // columns past N are not touched
            ASSERT_EQ(Cm[m * ldc + n], C0[m * ldc + n]);
            continue;
          }
          double ref = C0[m * ldc + n], mag = std::abs(ref);
          for (int64_t k = 0; k < K; ++k) {
            ref += static_cast<double>(A[m * lda + k]) * Bm[k * ldb + n];
            mag += std::abs(static_cast<double>(A[m * lda + k]) * Bm[k * ldb + n]);
          }
          ASSERT_LE(std::abs(Cm[m * ldc + n] - ref), (K + 2) * kEps32 * mag)
              << "form " << static_cast<int>(form) << " M " << M << " N " << N << " K " << K << " at " << m << "," << n;
        }
      }
    }
  }
}

TEST(TileMac, Bf16FormsMatchFp64) {
  std::mt19937 gen(8);
  std::normal_distribution<float> d;
  int forms_run = 0;
  for (TileMacForm form : kForms) {
    if (!tile_mac_form_available(form, true)) continue;
    ++forms_run;
    for (auto [M, N, K] : kCases) {
      const int64_t K2 = (K + 1) / 2, lda = 2 * K2 + 2, ldc = N + 2;
      std::vector<uint16_t> A(M * lda), Bp(2 * K2 * N);
      std::vector<float> Cm(M * ldc);
      for (auto& x : A) x = to_bf16(d(gen));
      for (auto& x : Bp) x = to_bf16(d(gen));
      for (auto& x : Cm) x = d(gen);
      std::vector<float> C0 = Cm;
      tile_mac_bf16_form(form, Cm.data(), ldc, A.data(), lda, Bp.data(), N, M, N, K2);
      for (int64_t m = 0; m < M; ++m) {
        for (int64_t n = 0; n < N; ++n) {
          double ref = C0[m * ldc + n], mag = std::abs(ref);
          for (int64_t k = 0; k < 2 * K2; ++k) {
            const double t = static_cast<double>(from_bf16(A[m * lda + k])) * from_bf16(Bp[2 * ((k / 2) * N + n) + k % 2]);
            ref += t;
            mag += std::abs(t);
          }
          ASSERT_LE(std::abs(Cm[m * ldc + n] - ref), (2 * K2 + 2) * kEps32 * mag)
              << "form " << static_cast<int>(form) << " M " << M << " N " << N << " K " << K << " at " << m << "," << n;
        }
        for (int64_t n = N; n < ldc; ++n) ASSERT_EQ(Cm[m * ldc + n], C0[m * ldc + n]);
      }
    }
  }
  EXPECT_GE(forms_run, 1);
  std::printf("bf16 tile products here: %s\n", tile_mac_bf16_path());
}

// The form tile_mac_bf16 runs is the fastest available, and a selection
// takes effect and can be undone; every available form can be selected.
TEST(TileMac, Bf16SelectionRunsTheSelectedForm) {
  const TileMacForm fastest = tile_mac_bf16_selected();
  for (TileMacForm form : kForms) {
    if (tile_mac_form_available(form, true)) {
      EXPECT_GE(static_cast<int>(fastest), static_cast<int>(form));
    }
  }
  const int64_t M = 20, N = 24, K2 = 40;
  std::mt19937 gen(9);
  std::normal_distribution<float> d;
  std::vector<uint16_t> A(M * 2 * K2), Bp(2 * K2 * N);
  for (auto* v : {&A, &Bp}) for (auto& x : *v) x = to_bf16(d(gen));
  for (TileMacForm form : kForms) {
    if (!tile_mac_form_available(form, true)) continue;
    std::vector<float> direct(M * N, 0.0f), selected(M * N, 0.0f);
    tile_mac_bf16_form(form, direct.data(), N, A.data(), 2 * K2, Bp.data(), N, M, N, K2);
    const TileMacForm before = tile_mac_bf16_select(form);
    EXPECT_EQ(tile_mac_bf16_selected(), form);
    EXPECT_STREQ(tile_mac_bf16_path(), tile_mac_form_name(form, true));
    tile_mac_bf16(selected.data(), N, A.data(), 2 * K2, Bp.data(), N, M, N, K2);
    tile_mac_bf16_select(before);
    EXPECT_EQ(direct, selected) << tile_mac_form_name(form, true);  // the same form: the same sums
  }
  EXPECT_EQ(tile_mac_bf16_selected(), fastest);
}

}  // namespace
}  // namespace tera::cpu
