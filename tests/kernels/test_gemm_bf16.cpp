// bf16 GEMM (kernels/cpu/gemm_bf16.cpp) against the fp64 reference, on odd
// sizes, every transpose, leading dimensions wider than the rows, alpha and
// beta. Two bounds, derived from the arithmetic:
//  1. Inputs already in bf16 (the operands the trainer will hold): products of
//     two bf16 values (8 significant bits each) are exact in fp32 (24 bits),
//     so the only error is fp32 accumulation of K terms, alpha's scaling and
//     beta's sum: |C - C_ref| <= (K + 2) * 2^-24 * (|alpha| sum_k |a_ik b_kj| + |beta c_ij|).
//  2. Against the fp32 inputs before rounding: each operand carries bf16's
//     unit roundoff 2^-8 (round to nearest even), so a product is off by at
//     most (2 * 2^-8 + 2^-16) of its magnitude before the fp32 accumulation:
//     |C - C_fp32ref| <= ((2 * 2^-8 + 2^-16) + (K + 2) * 2^-24) * (|alpha| sum |a b| + |beta c|).
// The second is the bound a bf16 training step's GEMMs carry against fp32;
// the test also checks it is not vacuous (the error is mostly near it).
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <vector>

#include "kernels/cpu/cpu_ops.h"

namespace tera {
namespace {

constexpr double kU32 = 5.960464477539063e-8;  // 2^-24
constexpr double kUbf16 = 3.90625e-3;          // 2^-8

uint16_t to_bf16(float f) {  // round to nearest even (no NaN inputs here)
  uint32_t u;
  std::memcpy(&u, &f, sizeof u);
  u += 0x7fff + ((u >> 16) & 1);
  return static_cast<uint16_t>(u >> 16);
}

double from_bf16(uint16_t b) {
  const uint32_t u = static_cast<uint32_t>(b) << 16;
  float f;
  std::memcpy(&f, &u, sizeof f);
  return f;
}

struct Case {
  bool ta, tb;
  int64_t M, N, K;
  int64_t pad;  // extra leading-dimension columns
  float alpha, beta;
};

// Element (i, k) of op(X) stored row-major with leading dimension ld.
double at(const std::vector<double>& x, bool trans, int64_t ld, int64_t i, int64_t k) {
  return trans ? x[static_cast<size_t>(k * ld + i)] : x[static_cast<size_t>(i * ld + k)];
}

class GemmBf16 : public ::testing::TestWithParam<Case> {};

TEST_P(GemmBf16, MatchesFp64WithinTheDerivedBounds) {
  const Case c = GetParam();
  std::mt19937_64 gen(42 + static_cast<uint64_t>(c.M * 7 + c.N * 3 + c.K));
  std::normal_distribution<float> d(0.0f, 1.0f);
  const int64_t a_rows = c.ta ? c.K : c.M, a_cols = c.ta ? c.M : c.K;
  const int64_t b_rows = c.tb ? c.N : c.K, b_cols = c.tb ? c.K : c.N;
  const int64_t lda = a_cols + c.pad, ldb = b_cols + c.pad, ldc = c.N + c.pad;
  std::vector<float> a32(static_cast<size_t>(a_rows * lda)), b32(static_cast<size_t>(b_rows * ldb));
  for (auto& v : a32) v = d(gen);
  for (auto& v : b32) v = d(gen);
  std::vector<uint16_t> a(a32.size()), b(b32.size());
  std::vector<double> a_bf(a.size()), b_bf(b.size()), a_fp(a.size()), b_fp(b.size());
  for (size_t i = 0; i < a.size(); ++i) a_bf[i] = from_bf16(a[i] = to_bf16(a32[i])), a_fp[i] = a32[i];
  for (size_t i = 0; i < b.size(); ++i) b_bf[i] = from_bf16(b[i] = to_bf16(b32[i])), b_fp[i] = b32[i];
  std::vector<float> C(static_cast<size_t>(c.M * ldc));
  for (auto& v : C) v = d(gen);
  const std::vector<float> C0 = C;

  cpu::gemm_bf16(c.ta, c.tb, c.M, c.N, c.K, c.alpha, a.data(), lda, b.data(), ldb, c.beta, C.data(), ldc);

  double worst1 = 0, worst2 = 0;
  for (int64_t i = 0; i < c.M; ++i) {
    for (int64_t j = 0; j < c.N; ++j) {
      double ref_bf = 0, ref_fp = 0, mag = 0;
      for (int64_t k = 0; k < c.K; ++k) {
        ref_bf += at(a_bf, c.ta, lda, i, k) * at(b_bf, c.tb, ldb, k, j);
        ref_fp += at(a_fp, c.ta, lda, i, k) * at(b_fp, c.tb, ldb, k, j);
        mag += std::abs(at(a_bf, c.ta, lda, i, k) * at(b_bf, c.tb, ldb, k, j));
      }
      const double c0 = C0[static_cast<size_t>(i * ldc + j)];
      const double scale = std::abs(c.alpha) * mag + std::abs(c.beta * c0);
      const double got = C[static_cast<size_t>(i * ldc + j)];
      const double bound1 = static_cast<double>(c.K + 2) * kU32 * scale;
      const double bound2 = (2 * kUbf16 + kUbf16 * kUbf16 + static_cast<double>(c.K + 2) * kU32) * scale;
      const double err1 = std::abs(got - (c.alpha * ref_bf + c.beta * c0));
      const double err2 = std::abs(got - (c.alpha * ref_fp + c.beta * c0));
      ASSERT_LE(err1, bound1) << "(" << i << ", " << j << ") against the bf16 operands";
      ASSERT_LE(err2, bound2) << "(" << i << ", " << j << ") against the fp32 operands";
      worst1 = std::max(worst1, err1 / bound1);
      worst2 = std::max(worst2, err2 / bound2);
    }
    // Padding columns of C are never written.
    for (int64_t j = c.N; j < ldc; ++j) {
      ASSERT_EQ(C[static_cast<size_t>(i * ldc + j)], C0[static_cast<size_t>(i * ldc + j)]) << "padding written";
    }
  }
  // The fp32-operand bound is the one that matters for training; rounding
  // the inputs must actually show (else the test would not see bf16 at all).
  if (c.K >= 8) {
    EXPECT_GT(worst2, 0.01) << "the result looks like an fp32 product: were the inputs rounded?";
  }
  std::printf("%s: worst error / bound: %.3f (bf16 operands), %.3f (fp32 operands)\n", cpu::gemm_bf16_path(),
              worst1, worst2);
}

INSTANTIATE_TEST_SUITE_P(Shapes, GemmBf16,
                         ::testing::Values(Case{false, false, 37, 29, 53, 0, 1.0f, 0.0f},
                                           Case{false, true, 33, 65, 127, 3, 1.0f, 1.0f},
                                           Case{true, false, 17, 41, 300, 5, 0.5f, 0.0f},
                                           Case{true, true, 64, 48, 96, 1, 1.0f, 0.25f},
                                           Case{false, true, 1, 301, 768, 0, 1.0f, 0.0f},
                                           Case{false, false, 129, 3, 1, 2, -2.0f, 1.0f}));

// The cast the bf16 linear layers round their activations with: exactly
// the reference rounding (nearest even) on ties, subnormals, the largest
// finite values (which round to infinity), infinities and NaNs.
// db = db0 + the column sums of dy[N, O], within fp32's bound of a sum of
// N + 1 terms (each column against fp64).
void expect_column_sums(const std::vector<float>& db, const std::vector<float>& db0, const std::vector<float>& dy,
                        int64_t N, int64_t O) {
  for (int64_t o = 0; o < O; ++o) {
    double ref = db0[static_cast<size_t>(o)], mag = std::abs(ref);
    for (int64_t n = 0; n < N; ++n) {
      ref += dy[static_cast<size_t>(n * O + o)];
      mag += std::abs(dy[static_cast<size_t>(n * O + o)]);
    }
    ASSERT_LE(std::abs(db[static_cast<size_t>(o)] - ref), static_cast<double>(N + 1) * kU32 * mag) << "db(" << o << ")";
  }
}

TEST(CastToBf16, RoundsToNearestEvenLikeTheReference) {
  std::vector<float> x = {0.0f, -0.0f, 1.0f, 1.00390625f /* tie: stays 1 */, 1.01171875f /* tie: rounds up */,
                          -3.14159f, 1e-40f, std::numeric_limits<float>::max(), -std::numeric_limits<float>::infinity(),
                          65504.0f, 1.0f / 3.0f};
  std::mt19937_64 gen(7);
  std::normal_distribution<float> d(0.0f, 100.0f);
  for (int i = 0; i < 1000; ++i) x.push_back(d(gen));
  std::vector<uint16_t> got(x.size());
  cpu::cast_to_bf16(got.data(), x.data(), static_cast<int64_t>(x.size()));
  for (size_t i = 0; i < x.size(); ++i) ASSERT_EQ(got[i], to_bf16(x[i])) << "x = " << x[i];
  const float nan = std::numeric_limits<float>::quiet_NaN();
  uint16_t n = 0;
  cpu::cast_to_bf16(&n, &nan, 1);
  EXPECT_TRUE(std::isnan(from_bf16(n)));
}

// The linear layers with bf16 GEMM inputs (ops.h LinearForwardBf16Fn) against
// the fp64 reference on the fp32 inputs: the weights W are given as the bf16
// copy of fp32 values w, the input as the bf16 copy of x (as the model keeps
// it), dy is rounded inside, so each output
// carries bound 2 above: |err| <= ((2 u_bf16 + u_bf16^2) + (K + 2) u_32) *
// sum|terms| (+ beta's term), K the reduction length (I forward, O for dx, N
// for dW); db sums the fp32 dy in fp32: (N + 1) u_32 sum |dy| (+ the initial db).
TEST(LinearBf16, ForwardAndBackwardMatchFp64WithinTheDerivedBound) {
  const int64_t N = 37, I = 53, O = 29;
  std::mt19937_64 gen(11);
  std::normal_distribution<float> d(0.0f, 1.0f);
  auto randv = [&](int64_t n) {
    std::vector<float> v(static_cast<size_t>(n));
    for (auto& e : v) e = d(gen);
    return v;
  };
  const std::vector<float> x = randv(N * I), w = randv(O * I), b = randv(O), dy = randv(N * O);
  std::vector<uint16_t> wb(w.size()), xb(x.size()), cast(static_cast<size_t>(N * O));
  for (size_t i = 0; i < w.size(); ++i) wb[i] = to_bf16(w[i]);
  for (size_t i = 0; i < x.size(); ++i) xb[i] = to_bf16(x[i]);
  const double rel = 2 * kUbf16 + kUbf16 * kUbf16;
  auto bound = [&](double mag, int64_t K) { return (rel + static_cast<double>(K + 2) * kU32) * mag; };
  // y = x @ w^T + b
  std::vector<float> y(static_cast<size_t>(N * O), 123.0f);
  cpu::linear_forward_bf16(y.data(), xb.data(), wb.data(), b.data(), N, I, O);
  double worst = 0;
  for (int64_t n = 0; n < N; ++n) {
    for (int64_t o = 0; o < O; ++o) {
      double ref = b[static_cast<size_t>(o)], mag = std::abs(ref);
      for (int64_t i = 0; i < I; ++i) {
        const double t = static_cast<double>(x[static_cast<size_t>(n * I + i)]) * w[static_cast<size_t>(o * I + i)];
        ref += t;
        mag += std::abs(t);
      }
      const double err = std::abs(y[static_cast<size_t>(n * O + o)] - ref);
      ASSERT_LE(err, bound(mag, I)) << "y(" << n << ", " << o << ")";
      worst = std::max(worst, err / bound(mag, I));
    }
  }
  EXPECT_GT(worst, 0.01) << "y looks like an fp32 product";
  // dx = dy @ w (accumulated onto dx0), dW += dy^T @ x, db += colsum(dy)
  const std::vector<float> dx0 = randv(N * I), dW0 = randv(O * I), db0 = randv(O);
  std::vector<float> dx = dx0, dW = dW0, db = db0;
  cpu::linear_backward_bf16(dx.data(), dW.data(), db.data(), dy.data(), xb.data(), wb.data(), N, I, O, true,
                            cast.data());
  // got[r, c] against init[r, c] + sum_k a(r, k) b(k, c) over k < K, within bound(sum |terms|, K).
  auto check_product = [&](const std::vector<float>& got, const std::vector<float>& init, int64_t R, int64_t Cc,
                           int64_t K, auto a, auto b, const char* what) {
    for (int64_t r = 0; r < R; ++r) {
      for (int64_t c = 0; c < Cc; ++c) {
        double ref = init[static_cast<size_t>(r * Cc + c)], mag = std::abs(ref);
        for (int64_t k = 0; k < K; ++k) {
          const double t = a(r, k) * b(k, c);
          ref += t;
          mag += std::abs(t);
        }
        ASSERT_LE(std::abs(got[static_cast<size_t>(r * Cc + c)] - ref), bound(mag, K))
            << what << "(" << r << ", " << c << ")";
      }
    }
  };
  auto at = [](const std::vector<float>& v, int64_t ld) {
    return [&v, ld](int64_t r, int64_t c) { return static_cast<double>(v[static_cast<size_t>(r * ld + c)]); };
  };
  auto at_t = [](const std::vector<float>& v, int64_t ld) {  // the transpose of a row-major [.., ld] matrix
    return [&v, ld](int64_t r, int64_t c) { return static_cast<double>(v[static_cast<size_t>(c * ld + r)]); };
  };
  check_product(dx, dx0, N, I, O, at(dy, O), at(w, I), "dx");     // dx[N,I] = dx0 + dy[N,O] @ w[O,I]
  check_product(dW, dW0, O, I, N, at_t(dy, O), at(x, I), "dW");   // dW[O,I] = dW0 + dy^T @ x[N,I]
  expect_column_sums(db, db0, dy, N, O);
  // Without accumulate_dx, dx is overwritten; a null dx and db are skipped.
  std::vector<float> dx2(dx0.size(), 1e30f), dW2 = dW0;
  cpu::linear_backward_bf16(dx2.data(), dW2.data(), nullptr, dy.data(), xb.data(), wb.data(), N, I, O, false,
                            cast.data());
  for (size_t k = 0; k < dx2.size(); ++k) ASSERT_LT(std::abs(dx2[k] - (dx[k] - dx0[k])), 1e-3) << k;
  cpu::linear_backward_bf16(nullptr, dW2.data(), nullptr, dy.data(), xb.data(), wb.data(), N, I, O, false, cast.data());
}

// The bias in the GEMM's epilogue (the forward's y written once): against
// fp64 within the bound above with the bias in the sum, on a shape with
// several of oneDNN's blocks in each dimension and a remainder.
TEST(GemmBf16, BiasInTheEpilogue) {
  const int64_t M = 70, N = 300, K = 96;
  std::mt19937_64 gen(12);
  std::normal_distribution<float> d(0.0f, 1.0f);
  std::vector<uint16_t> a(static_cast<size_t>(M * K)), b(static_cast<size_t>(N * K));
  for (auto* v : {&a, &b}) {
    for (auto& e : *v) e = to_bf16(d(gen));
  }
  std::vector<float> bias(static_cast<size_t>(N)), C(static_cast<size_t>(M * N), 1e30f);
  for (auto& e : bias) e = d(gen);
  cpu::gemm_bf16(false, true, M, N, K, 1.0f, a.data(), K, b.data(), K, 0.0f, C.data(), N, bias.data());
  for (int64_t m = 0; m < M; ++m) {
    for (int64_t n = 0; n < N; ++n) {
      double ref = bias[static_cast<size_t>(n)], mag = std::abs(ref);
      for (int64_t k = 0; k < K; ++k) {
        const double t = static_cast<double>(from_bf16(a[static_cast<size_t>(m * K + k)])) *
                         from_bf16(b[static_cast<size_t>(n * K + k)]);
        ref += t;
        mag += std::abs(t);
      }
      ASSERT_LE(std::abs(C[static_cast<size_t>(m * N + n)] - ref), static_cast<double>(K + 2) * kU32 * mag)
          << "(" << m << ", " << n << ")";
    }
  }
}

// The backward's one pass over dy: the cast exactly as cast_to_bf16, the
// column sums within fp32's bound of a sum of N + 1 terms, over column
// blocks (64) with a remainder.
TEST(CastToBf16, AndColumnSumsInOnePass) {
  const int64_t N = 33, O = 200;
  std::mt19937_64 gen(13);
  std::normal_distribution<float> d(0.0f, 3.0f);
  std::vector<float> dy(static_cast<size_t>(N * O)), db(static_cast<size_t>(O));
  for (auto& e : dy) e = d(gen);
  for (auto& e : db) e = d(gen);
  const std::vector<float> db0 = db;
  std::vector<uint16_t> got(dy.size()), want(dy.size());
  cpu::cast_to_bf16_and_add_column_sums(got.data(), db.data(), dy.data(), N, O);
  cpu::cast_to_bf16(want.data(), dy.data(), N * O);
  EXPECT_EQ(got, want);
  expect_column_sums(db, db0, dy, N, O);
}

TEST(GemmBf16Path, IsReported) { EXPECT_NE(std::string(cpu::gemm_bf16_path()).size(), 0u); }

}  // namespace
}  // namespace tera
