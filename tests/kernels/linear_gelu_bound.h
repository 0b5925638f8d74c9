// The fp64 references and error bounds of the GELU MLP's fused bf16 ops
// (ops.h: linear_gelu_forward_bf16, linear_backward_gelu_bf16) on bf16
// numbers x, W, pre (as doubles) and fp32 b, dy, derived from where the
// kernels round (u = 2^-8 per bf16 rounding, e = 2^-24 per fp32 operation):
//   y     = x W^T + b:  (I + 2) e (sum |x w| + |b|), plus u |b| for a bias
//           rounded to bf16 first (cuBLASLt's bias has the output's type)
//   pre   = bf16(y):    u |y| + (1 + u) tol_y
//   act   = bf16(gelu(y)): |gelu'| <= 1.13 carries y's error, the fp32 GELU
//           adds 16 e (1 + |y|) (the GELU cases' bound), then u |act|; a GELU
//           whose tanh is a hardware approximation of absolute error d
//           (cuBLASLt's epilogue: tanh.approx.f32, |rel err| <= 2^-11, taken
//           as d = 2^-10) adds 0.5 |y| d, since gelu = 0.5 y (1 + tanh)
//   dpre  = (bf16(dy) W) gelu'(pre): (u + (O + 2) e) sum |dy w| =: t, times
//           |gelu'| <= 1.13, plus gelu''s fp32 error 16 e (1 + |p| (1 + p^2))
//           on |dy W| + t
//   dW   += bf16(dy)^T x: (u + (N + 2) e) sum |dy x| + (N + 2) e |dW0|
//   db   += sum dy (fp32): (N + 2) e (sum |dy| + |db0|)
// Used by the conformance suite (tests/kernels/test_conformance.cpp) and by
// tera-device-check (tests/gpu/device_check.cpp): no dependency beyond the
// standard library.
#pragma once

#include <cmath>
#include <cstdint>
#include <utility>
#include <vector>

namespace tera::testing {

inline double gelu_tanh(double x) {
  const double k = 0.7978845608028654, a = 0.044715;
  return 0.5 * x * (1.0 + std::tanh(k * (x + a * x * x * x)));
}
inline double gelu_tanh_derivative(double x) {
  const double k = 0.7978845608028654, a = 0.044715;
  const double t = std::tanh(k * (x + a * x * x * x));
  return 0.5 * (1.0 + t) + 0.5 * x * (1.0 - t * t) * k * (1.0 + 3.0 * a * x * x);
}

// The sum of K products term(j) and the sum of their magnitudes.
template <typename Term>
inline std::pair<double, double> sum_and_magnitude(int64_t K, Term term) {
  double s = 0, a = 0;
  for (int64_t j = 0; j < K; ++j) {
    const double v = term(j);
    s += v;
    a += std::abs(v);
  }
  return {s, a};
}

constexpr double kLinearGeluU = 1.0 / 256;  // bf16's unit roundoff
constexpr double kLinearGeluE = 5.96e-8;    // fp32's
constexpr double kGeluSlope = 1.13;         // max |gelu'| (1.129 at x = 1.5)
constexpr double kApproxTanhError = 1.0 / 1024;  // a hardware tanh's (cuBLASLt's GELU epilogue), with margin

struct LinearGeluForwardRef {
  std::vector<double> pre, act;          // [N, O]: y and gelu(y) in fp64
  std::vector<double> tol_pre, tol_act;  // the bf16 outputs' bounds
};

// x[N,I], W[O,I], b[O] (b may be empty: no bias). tanh_error: the absolute
// error of the tanh inside the GELU under test (0: fp32 tanhf, the dialect's).
inline LinearGeluForwardRef linear_gelu_forward_ref(const std::vector<double>& x, const std::vector<double>& W,
                                                    const std::vector<double>& b, int64_t N, int64_t I, int64_t O,
                                                    double tanh_error = 0) {
  const double u = kLinearGeluU, e = kLinearGeluE;
  LinearGeluForwardRef r;
  r.pre.resize(N * O);
  r.act.resize(N * O);
  r.tol_pre.resize(N * O);
  r.tol_act.resize(N * O);
  for (int64_t n = 0; n < N; ++n)
    for (int64_t o = 0; o < O; ++o) {
      const double bo = b.empty() ? 0.0 : b[o];
      auto [s, a] = sum_and_magnitude(I, [&](int64_t i) { return x[n * I + i] * W[o * I + i]; });
      s += bo;
      a += std::abs(bo);
      const size_t k = static_cast<size_t>(n * O + o);
      const double tol_y = (I + 2) * e * a + u * std::abs(bo);
      const double act = gelu_tanh(s);
      const double tol_act = kGeluSlope * tol_y + 16 * e * (1 + std::abs(s)) + 0.5 * std::abs(s) * tanh_error;
      r.pre[k] = s;
      r.act[k] = act;
      r.tol_pre[k] = u * std::abs(s) + (1 + u) * tol_y + 1e-30;
      r.tol_act[k] = u * std::abs(act) + (1 + u) * tol_act + 1e-30;
    }
  return r;
}

struct LinearGeluBackwardRef {
  std::vector<double> dpre, dW, db;
  std::vector<double> tol_dpre, tol_dW, tol_db;
};

// The layer's input x[N,I] = gelu(pre) as the forward stored it (bf16
// numbers), W[O,I], dy[N,O]; dW0[O,I] and db0[O] the gradients it adds to.
inline LinearGeluBackwardRef linear_backward_gelu_ref(const std::vector<double>& dy, const std::vector<double>& x,
                                                      const std::vector<double>& W, const std::vector<double>& pre,
                                                      const std::vector<double>& dW0, const std::vector<double>& db0,
                                                      int64_t N, int64_t I, int64_t O) {
  const double u = kLinearGeluU, e = kLinearGeluE;
  LinearGeluBackwardRef r;
  r.dpre.resize(N * I);
  r.tol_dpre.resize(N * I);
  for (int64_t n = 0; n < N; ++n)
    for (int64_t i = 0; i < I; ++i) {
      const auto [s, a] = sum_and_magnitude(O, [&](int64_t o) { return dy[n * O + o] * W[o * I + i]; });
      const size_t k = static_cast<size_t>(n * I + i);
      const double p = pre[k], t = (u + (O + 2) * e) * a;
      r.dpre[k] = s * gelu_tanh_derivative(p);
      r.tol_dpre[k] = kGeluSlope * t + 16 * e * (1 + std::abs(p) * (1 + p * p)) * (std::abs(s) + t) + 1e-30;
    }
  r.dW = dW0;
  r.db = db0;
  r.tol_dW.resize(O * I);
  r.tol_db.resize(O);
  for (int64_t o = 0; o < O; ++o) {
    for (int64_t i = 0; i < I; ++i) {
      const auto [s, a] = sum_and_magnitude(N, [&](int64_t n) { return dy[n * O + o] * x[n * I + i]; });
      const size_t k = static_cast<size_t>(o * I + i);
      r.tol_dW[k] = (u + (N + 2) * e) * a + (N + 2) * e * std::abs(dW0[k]) + 1e-30;
      r.dW[k] += s;
    }
    double ab = std::abs(db0[o]);
    for (int64_t n = 0; n < N; ++n) {
      r.db[o] += dy[n * O + o];
      ab += std::abs(dy[n * O + o]);
    }
    r.tol_db[o] = (N + 2) * e * ab + 1e-30;
  }
  return r;
}

}  // namespace tera::testing
