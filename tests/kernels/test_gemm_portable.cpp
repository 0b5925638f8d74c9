// The portable GEMM (kernels/cpu/gemm_portable.h, the CPU GEMM of a build
// without oneDNN and OpenBLAS) against an fp64 reference computed in long
// double here, on shapes that cross every blocking edge (the 4-row and
// 64-column register tiles, the 256-deep and 512-wide packed panels), every
// transpose, padded leading dimensions, alpha and beta.
// Bound from the arithmetic (a dot product of K terms summed in fp32 in any
// order, alpha folded into A, then beta's term added):
//   |C - C_ref| <= (K + 2) u (|alpha| sum_k |a_ik b_kj| + |beta c_ij|),
// u = 2^-24 in fp32 and 2^-53 in fp64. The test also requires the error to be
// a visible fraction of the bound in fp32 (the bound is not vacuous) and
// that beta = 0 overwrites a NaN in C, as BLAS does.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <random>
#include <vector>

#include "kernels/cpu/gemm_portable.h"

namespace tera {
namespace {

struct Case {
  bool ta, tb;
  int64_t M, N, K;
  int64_t pad;
  double alpha, beta;
};

template <typename T>
void check_case(const Case& c, double u, double* worst_ratio) {
  std::mt19937_64 gen(7 + static_cast<uint64_t>(c.M * 131 + c.N * 17 + c.K));
  std::uniform_real_distribution<double> dist(-1.0, 1.0);
  const int64_t a_rows = c.ta ? c.K : c.M, a_cols = c.ta ? c.M : c.K;
  const int64_t b_rows = c.tb ? c.N : c.K, b_cols = c.tb ? c.K : c.N;
  const int64_t lda = a_cols + c.pad, ldb = b_cols + c.pad, ldc = c.N + c.pad;
  std::vector<T> A(static_cast<size_t>(a_rows * lda)), B(static_cast<size_t>(b_rows * ldb)),
      C(static_cast<size_t>(c.M * ldc));
  for (auto& x : A) x = static_cast<T>(dist(gen));
  for (auto& x : B) x = static_cast<T>(dist(gen));
  for (auto& x : C) x = c.beta == 0 ? std::numeric_limits<T>::quiet_NaN() : static_cast<T>(dist(gen));
  const std::vector<T> C0 = C;
  cpu::gemm_portable<T>(c.ta, c.tb, c.M, c.N, c.K, static_cast<T>(c.alpha), A.data(), lda, B.data(), ldb,
                        static_cast<T>(c.beta), C.data(), ldc);
  for (int64_t i = 0; i < c.M; ++i) {
    for (int64_t j = 0; j < c.N; ++j) {
      long double ref = 0, mag = 0;
      for (int64_t k = 0; k < c.K; ++k) {
        const long double a = c.ta ? A[static_cast<size_t>(k * lda + i)] : A[static_cast<size_t>(i * lda + k)];
        const long double b = c.tb ? B[static_cast<size_t>(j * ldb + k)] : B[static_cast<size_t>(k * ldb + j)];
        ref += a * b;
        mag += std::fabs(a * b);
      }
      const long double c0 = c.beta == 0 ? 0 : C0[static_cast<size_t>(i * ldc + j)];
      ref = c.alpha * ref + c.beta * c0;
      const double bound = static_cast<double>(c.K + 2) * u *
                           static_cast<double>(std::fabs(c.alpha) * mag + std::fabs(c.beta * c0));
      const double err = std::fabs(static_cast<double>(C[static_cast<size_t>(i * ldc + j)] - ref));
      ASSERT_LE(err, bound) << "C(" << i << "," << j << ") " << c.M << "x" << c.N << "x" << c.K << " ta=" << c.ta
                            << " tb=" << c.tb;
      if (bound > 0) *worst_ratio = std::max(*worst_ratio, err / bound);
    }
    // Padding columns of C are never written.
    for (int64_t j = c.N; j < ldc; ++j) {
      const T before = C0[static_cast<size_t>(i * ldc + j)], after = C[static_cast<size_t>(i * ldc + j)];
      ASSERT_TRUE((std::isnan(before) && std::isnan(after)) || before == after);
    }
  }
}

std::vector<Case> cases() {
  std::vector<Case> out;
  for (bool ta : {false, true}) {
    for (bool tb : {false, true}) {
      out.push_back({ta, tb, 1, 1, 1, 0, 1.0, 0.0});
      out.push_back({ta, tb, 7, 65, 3, 2, 1.0, 0.0});
      out.push_back({ta, tb, 9, 130, 257, 1, 0.5, 1.0});        // 2 panels deep, tile edges
      out.push_back({ta, tb, 33, 600, 70, 3, -1.0, 0.25});      // 2 panels wide
      out.push_back({ta, tb, 64, 64, 600, 0, 1.0, 1.0});        // 3 panels deep, whole tiles
    }
  }
  out.push_back({false, true, 5, 0, 4, 0, 1.0, 0.0});           // empty C
  out.push_back({false, false, 6, 10, 0, 0, 1.0, 0.5});         // K = 0: C = beta C
  return out;
}

TEST(GemmPortable, Fp32MatchesTheReferenceWithinTheDerivedBound) {
  double worst = 0;
  for (const Case& c : cases()) check_case<float>(c, 5.960464477539063e-8, &worst);
  EXPECT_GT(worst, 1e-3) << "the fp32 error should be a visible fraction of its bound";
}

TEST(GemmPortable, Fp64MatchesTheReferenceWithinTheDerivedBound) {
  double worst = 0;
  for (const Case& c : cases()) check_case<double>(c, 1.1102230246251565e-16, &worst);
}

}  // namespace
}  // namespace tera
