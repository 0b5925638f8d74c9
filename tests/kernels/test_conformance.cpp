// Conformance of every op on every backend (STYLE.md principle 4):
//  1. the fp64 CPU instantiation's backward matches central finite
//     differences of its forward (h = 1e-5: truncation h^2 |f'''| ~ 1e-10,
//     rounding eps64 |L| / h ~ 1e-10, so 1e-6 relative is a loose, safe bar);
//  2. each backend's fp32 op matches the fp64 one on the same fp32-rounded
//     inputs within a bound derived from the op's accumulation length K:
//     |err| <= K * eps32 * (sum of |terms|), stated per op.
// The fp32 side runs in the backend's own memory: inputs are copied to
// device buffers and results copied back (so on cpu-guarded the harness
// itself proves it never touches device memory). Sizes are deliberately not
// multiples of the vector width, and device buffers sit at a misaligned
// (+1 float) offset.
#include <gtest/gtest.h>

#include <array>
#include <bit>
#include <cmath>
#include <functional>
#include <memory>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "kernels/backend.h"
#include "kernels/backend_registry.h"
#include "kernels/profiling_backend.h"
#include "kernels/cpu/bf16.h"
#include "kernels/cpu/cpu_ops.h"
#include "kernels/gpu/emu/backend_gpu_emu.h"
#include "kernels/gpu/emu/emulator.h"
#include "flash_bf16_bound.h"
#include "linear_gelu_bound.h"
#include "ring_split.h"
#include "kernels/gpu/kernels/adamw_batch.h"

namespace tera {
namespace {

constexpr double kEps32 = 5.96e-8;  // 2^-24, unit roundoff of fp32

struct Inputs {
  std::mt19937_64 gen{1234};
  std::vector<double> normal(size_t n, double sd = 1.0) {
    std::normal_distribution<double> d(0.0, sd);
    std::vector<double> v(n);
    // Values representable in fp32, so both paths see identical inputs.
    for (auto& x : v) x = static_cast<double>(static_cast<float>(d(gen)));
    return v;
  }
};

// An fp32 device buffer of the backend under test at a misaligned address
// (+1 float), filled from host values (or zeros) and read back by copy.
struct F32 {
  const Backend& be;
  void* base = nullptr;
  float* p = nullptr;  // device memory
  size_t n;
  F32(const Backend& b, const std::vector<double>& v) : F32(b, v.size()) {
    std::vector<float> h(v.size());
    for (size_t i = 0; i < v.size(); ++i) h[i] = static_cast<float>(v[i]);
    be.copy(p, h.data(), static_cast<int64_t>(n * sizeof(float)), CopyKind::host_to_device);
  }
  F32(const Backend& b, size_t count) : be(b), n(count) {
    base = be.alloc(static_cast<int64_t>((n + 1) * sizeof(float)));
    be.fill(base, DType::f32, 0.0, static_cast<int64_t>(n + 1));
    p = static_cast<float*>(base) + 1;
  }
  F32(const F32&) = delete;
  F32& operator=(const F32&) = delete;
  ~F32() { be.release(base); }
  std::vector<float> host() const {
    std::vector<float> h(n);
    be.copy(h.data(), p, static_cast<int64_t>(n * sizeof(float)), CopyKind::device_to_host);
    return h;
  }
};

// Token ids or targets in device memory.
struct I32 {
  const Backend& be;
  int32_t* p;
  I32(const Backend& b, const std::vector<int32_t>& v) : be(b) {
    p = static_cast<int32_t*>(be.alloc(static_cast<int64_t>(v.size() * sizeof(int32_t))));
    be.copy(p, v.data(), static_cast<int64_t>(v.size() * sizeof(int32_t)), CopyKind::host_to_device);
  }
  I32(const I32&) = delete;
  I32& operator=(const I32&) = delete;
  ~I32() { be.release(p); }
};

double dot(const std::vector<double>& a, const std::vector<double>& b) {
  double s = 0;
  for (size_t i = 0; i < a.size(); ++i) s += a[i] * b[i];
  return s;
}

// Central differences of scalar loss() w.r.t. x[i] for every i; compares with g.
void fd_check(std::vector<double>& x, const std::function<double()>& loss, const std::vector<double>& g,
              const char* what, double rel = 1e-6) {
  ASSERT_EQ(x.size(), g.size()) << what;
  const double h = 1e-5;
  double gmax = 1e-3;
  for (double v : g) gmax = std::max(gmax, std::abs(v));
  for (size_t i = 0; i < x.size(); ++i) {
    const double x0 = x[i];
    x[i] = x0 + h;
    const double lp = loss();
    x[i] = x0 - h;
    const double lm = loss();
    x[i] = x0;
    const double fd = (lp - lm) / (2 * h);
    ASSERT_NEAR(g[i], fd, rel * gmax) << what << " element " << i;
  }
}

// Max |a - b| must be within tol[i] for every element.
void expect_within(const std::vector<float>& got, const std::vector<double>& ref, const std::vector<double>& tol,
                   const char* what) {
  for (size_t i = 0; i < ref.size(); ++i) {
    ASSERT_LE(std::abs(static_cast<double>(got[i]) - ref[i]), tol[i]) << what << " element " << i;
  }
}
std::vector<double> uniform_tol(size_t n, double t) { return std::vector<double>(n, t); }
// |got - ref| <= rel * (1 + |ref|) for every element.
void expect_near_rel(const std::vector<double>& got, const std::vector<double>& ref, double rel, const char* what) {
  ASSERT_EQ(got.size(), ref.size()) << what;
  for (size_t i = 0; i < ref.size(); ++i) ASSERT_NEAR(got[i], ref[i], rel * (1 + std::abs(ref[i]))) << what << " " << i;
}

// Every case runs once per backend (by name). gpu-emu runs the GPU kernels
// (the kernel dialect) on the SIMT emulator at both warp widths, and at
// warp 64 with the dialect's GEMM kernels too (gpu-emu-w64-tiles: the hip
// backend's path, its tile primitive in the MFMA form); an op not
// yet written in the dialect is null in its table and the case is skipped,
// saying so.
class Conformance : public ::testing::TestWithParam<const char*> {
 protected:
  void SetUp() override {
    const std::string name = GetParam();
    if (name.rfind("gpu-emu", 0) == 0) {
      GpuEmuOptions o;
      o.warp = name.rfind("gpu-emu-w64", 0) == 0 ? 64 : 32;
      o.tile_gemms = name.find("-tiles") != std::string::npos;  // the hip backend's GEMMs
      backend_ = make_gpu_emu_backend(o);
    } else {
      auto made = make_backend(name);
      ASSERT_TRUE(made.ok()) << made.error();
      backend_ = std::move(*made);
    }
  }
  const Backend& be() const { return *backend_; }
  std::unique_ptr<Backend> backend_;  // an instance of its own per case
};

// Skips the case on a backend that does not fill every op it uses.
#define NEED_OPS(...)                                                                                  \
  do {                                                                                                 \
    for (KernelOp op_ : {__VA_ARGS__}) {                                                               \
      if (!has_op(be(), op_)) GTEST_SKIP() << be().name << " has no " << kernel_op_name(op_) << " yet"; \
    }                                                                                                  \
  } while (0)

TEST_P(Conformance, GemmAllTransposesAndStrides) {
  NEED_OPS(KernelOp::gemm);
  Inputs in;
  // One tile, and several 64-wide tiles with several 32-deep k steps and
  // ragged edges (the dialect's GEMM kernels, gemm.cuh).
  for (const auto [M, N, K] : {std::array<int64_t, 3>{13, 17, 29}, std::array<int64_t, 3>{70, 130, 75}})
  for (bool ta : {false, true}) {
    for (bool tb : {false, true}) {
      const int64_t pad = 3;
      const int64_t lda = (ta ? M : K) + pad, ldb = (tb ? K : N) + pad, ldc = N + pad;
      auto A = in.normal(static_cast<size_t>((ta ? K : M) * lda));
      auto B = in.normal(static_cast<size_t>((tb ? N : K) * ldb));
      auto C0 = in.normal(static_cast<size_t>(M * ldc));
      std::vector<double> C = C0, mag(C0.size());
      const double alpha = 0.75, beta = 0.5;
      cpu::gemm<double>(ta, tb, M, N, K, alpha, A.data(), lda, B.data(), ldb, beta, C.data(), ldc);
      // Element-wise reference from the definition, and the bound on |terms|.
      for (int64_t i = 0; i < M; ++i) {
        for (int64_t j = 0; j < N; ++j) {
          double s = 0, a = 0;
          for (int64_t k = 0; k < K; ++k) {
            const double x = ta ? A[k * lda + i] : A[i * lda + k];
            const double y = tb ? B[j * ldb + k] : B[k * ldb + j];
            s += x * y;
            a += std::abs(x * y);
          }
          const double want = alpha * s + beta * C0[i * ldc + j];
          ASSERT_NEAR(C[i * ldc + j], want, 1e-12 * (a + 1)) << "fp64 gemm ta=" << ta << " tb=" << tb;
          mag[i * ldc + j] = (K + 2) * kEps32 * (alpha * a + beta * std::abs(C0[i * ldc + j])) + 1e-30;
        }
      }
      F32 Af(be(), A), Bf(be(), B), Cf(be(), C0);
      be().gemm(ta, tb, M, N, K, 0.75f, Af.p, lda, Bf.p, ldb, 0.5f, Cf.p, ldc);
      const std::vector<float> got = Cf.host();
      for (int64_t i = 0; i < M; ++i)
        for (int64_t j = 0; j < N; ++j)
          ASSERT_LE(std::abs(got[i * ldc + j] - C[i * ldc + j]), mag[i * ldc + j]) << "fp32 gemm " << i << "," << j;
    }
  }
}

TEST_P(Conformance, Linear) {
  NEED_OPS(KernelOp::linear_forward, KernelOp::linear_backward);
  Inputs in;
  const int64_t N = 7, I = 19, O = 11;
  auto x = in.normal(N * I), W = in.normal(O * I), b = in.normal(O), R = in.normal(N * O);
  auto loss = [&] {
    std::vector<double> y(N * O);
    cpu::linear_forward<double>(y.data(), x.data(), W.data(), b.data(), N, I, O);
    return dot(y, R);
  };
  std::vector<double> dx(N * I), dW(O * I, 0.0), db(O, 0.0);
  cpu::linear_backward<double>(dx.data(), dW.data(), db.data(), R.data(), x.data(), W.data(), N, I, O);
  fd_check(x, loss, dx, "linear dx");
  fd_check(W, loss, dW, "linear dW");
  fd_check(b, loss, db, "linear db");
  // fp32 vs fp64: inputs are O(1) normals, accumulation length I (forward), N or O (backward).
  std::vector<double> y(N * O);
  cpu::linear_forward<double>(y.data(), x.data(), W.data(), b.data(), N, I, O);
  F32 xf(be(), x), Wf(be(), W), bf(be(), b), Rf(be(), R), yf(be(), N * O), dxf(be(), N * I), dWf(be(), O * I), dbf(be(), O);
  be().linear_forward(yf.p, xf.p, Wf.p, bf.p, N, I, O);
  const double bound_fwd = (I + 1) * kEps32 * (I * 16.0);  // sum |x w| <= I * max|x| max|w|, |x|,|w| < 4
  expect_within(yf.host(), y, uniform_tol(y.size(), bound_fwd), "linear fwd fp32");
  be().linear_backward(dxf.p, dWf.p, dbf.p, Rf.p, xf.p, Wf.p, N, I, O, false);
  expect_within(dxf.host(), dx, uniform_tol(dx.size(), (O + 1) * kEps32 * O * 16.0), "linear dx fp32");
  // accumulate_dx adds the same product to what dx holds (a gated MLP's second input projection).
  F32 dx2(be(), dx);
  std::vector<double> twice(dx.size());
  for (size_t i = 0; i < dx.size(); ++i) twice[i] = 2 * dx[i];
  F32 dWs(be(), O * I);
  be().linear_backward(dx2.p, dWs.p, nullptr, Rf.p, xf.p, Wf.p, N, I, O, true);
  expect_within(dx2.host(), twice, uniform_tol(dx.size(), 3 * (O + 1) * kEps32 * O * 16.0), "linear dx accumulated fp32");
  expect_within(dWf.host(), dW, uniform_tol(dW.size(), (N + 1) * kEps32 * N * 16.0), "linear dW fp32");
  expect_within(dbf.host(), db, uniform_tol(db.size(), (N + 1) * kEps32 * N * 4.0), "linear db fp32");
}

TEST_P(Conformance, LayerNorm) {
  NEED_OPS(KernelOp::layernorm_forward, KernelOp::layernorm_backward);
  Inputs in;
  const int64_t N = 5, C = 37;
  auto x = in.normal(N * C, 2.0), g = in.normal(C), b = in.normal(C), R = in.normal(N * C);
  std::vector<double> mean(N), rstd(N), y(N * C);
  auto loss = [&] {
    cpu::layernorm_forward<double>(y.data(), mean.data(), rstd.data(), x.data(), g.data(), b.data(), N, C);
    return dot(y, R);
  };
  loss();
  std::vector<double> y_ref = y, mean_ref = mean, rstd_ref = rstd;
  auto dx0 = in.normal(N * C);  // dx accumulates: start from a non-zero residual gradient
  std::vector<double> dx = dx0, dg(C, 0.0), db(C, 0.0);
  cpu::layernorm_backward<double>(dx.data(), dg.data(), db.data(), R.data(), x.data(), g.data(), mean.data(),
                                  rstd.data(), N, C);
  std::vector<double> dx_only(N * C);
  for (size_t i = 0; i < dx.size(); ++i) dx_only[i] = dx[i] - dx0[i];
  fd_check(x, loss, dx_only, "layernorm dx");
  fd_check(g, loss, dg, "layernorm dg");
  fd_check(b, loss, db, "layernorm db");
  // fp32: xhat has |xhat| <= sqrt(C); the mean/variance sums have length C.
  F32 xf(be(), x), gf(be(), g), bf(be(), b), Rf(be(), R), yf(be(), N * C), mf(be(), N), rf(be(), N), dxf(be(), dx0), dgf(be(), C), dbf(be(), C);
  be().layernorm_forward(yf.p, mf.p, rf.p, xf.p, gf.p, bf.p, N, C);
  const double t = 4 * C * kEps32 * std::sqrt(static_cast<double>(C)) * 16.0;
  expect_within(yf.host(), y_ref, uniform_tol(y_ref.size(), t), "layernorm fwd fp32");
  be().layernorm_backward(dxf.p, dgf.p, dbf.p, Rf.p, xf.p, gf.p, mf.p, rf.p, N, C);
  expect_within(dxf.host(), dx, uniform_tol(dx.size(), t), "layernorm dx fp32");
  expect_within(dgf.host(), dg, uniform_tol(dg.size(), N * t), "layernorm dg fp32");
  expect_within(dbf.host(), db, uniform_tol(db.size(), N * 4 * kEps32 * 4.0), "layernorm db fp32");
}

TEST_P(Conformance, RmsNorm) {
  NEED_OPS(KernelOp::rmsnorm_forward, KernelOp::rmsnorm_backward);
  Inputs in;
  const int64_t N = 5, C = 37;
  const float eps = 1e-5f;
  auto x = in.normal(N * C, 2.0), g = in.normal(C), R = in.normal(N * C);
  std::vector<double> rstd(N), y(N * C);
  auto loss = [&] {
    cpu::rmsnorm_forward<double>(y.data(), rstd.data(), x.data(), g.data(), N, C, eps);
    return dot(y, R);
  };
  loss();
  // Closed form of one row.
  double ms = 0;
  for (int64_t c = 0; c < C; ++c) ms += x[c] * x[c] / C;
  ASSERT_NEAR(rstd[0], 1.0 / std::sqrt(ms + static_cast<double>(eps)), 1e-12);
  ASSERT_NEAR(y[3], x[3] * rstd[0] * g[3], 1e-12);
  std::vector<double> y_ref = y, rstd_ref = rstd;
  auto dx0 = in.normal(N * C);  // dx accumulates: start from a non-zero residual gradient
  std::vector<double> dx = dx0, dg(C, 0.0);
  cpu::rmsnorm_backward<double>(dx.data(), dg.data(), R.data(), x.data(), g.data(), rstd.data(), N, C);
  std::vector<double> dx_only(N * C);
  for (size_t i = 0; i < dx.size(); ++i) dx_only[i] = dx[i] - dx0[i];
  fd_check(x, loss, dx_only, "rmsnorm dx");
  fd_check(g, loss, dg, "rmsnorm dg");
  // fp32: xhat has |xhat| <= sqrt(C); the mean of squares sums C terms.
  F32 xf(be(), x), gf(be(), g), Rf(be(), R), yf(be(), N * C), rf(be(), N), dxf(be(), dx0), dgf(be(), C);
  be().rmsnorm_forward(yf.p, rf.p, xf.p, gf.p, N, C, eps);
  const double t = 4 * C * kEps32 * std::sqrt(static_cast<double>(C)) * 16.0;
  expect_within(yf.host(), y_ref, uniform_tol(y_ref.size(), t), "rmsnorm fwd fp32");
  be().rmsnorm_backward(dxf.p, dgf.p, Rf.p, xf.p, gf.p, rf.p, N, C);
  expect_within(dxf.host(), dx, uniform_tol(dx.size(), t), "rmsnorm dx fp32");
  expect_within(dgf.host(), dg, uniform_tol(dg.size(), N * t), "rmsnorm dg fp32");
}

TEST_P(Conformance, Swiglu) {
  NEED_OPS(KernelOp::swiglu_forward, KernelOp::swiglu_backward);
  Inputs in;
  const int64_t n = 101;
  auto gate = in.normal(n, 3.0), up = in.normal(n), R = in.normal(n);
  std::vector<double> y(n);
  auto loss = [&] {
    cpu::swiglu_forward<double>(y.data(), gate.data(), up.data(), n);
    return dot(y, R);
  };
  loss();
  for (int64_t i = 0; i < n; ++i) ASSERT_NEAR(y[i], gate[i] / (1 + std::exp(-gate[i])) * up[i], 1e-14 * (1 + std::abs(y[i])));
  std::vector<double> y_ref = y, dgate(n), dup(n);
  cpu::swiglu_backward<double>(dgate.data(), dup.data(), gate.data(), up.data(), R.data(), n);
  fd_check(gate, loss, dgate, "swiglu dgate");
  fd_check(up, loss, dup, "swiglu dup");
  // fp32: the sigmoid through exp_approx (~2 ulp) and a few products: a few
  // eps32 relative to |gate| |up| (and, in the derivative, |gate| more).
  F32 gf(be(), gate), uf(be(), up), Rf(be(), R), yf(be(), n), dgf(be(), n), duf(be(), n);
  be().swiglu_forward(yf.p, gf.p, uf.p, n);
  std::vector<double> tol(n), tol_g(n), tol_u(n);
  for (int64_t i = 0; i < n; ++i) {
    const double a = std::abs(gate[i]) + 1;
    tol[i] = 16 * kEps32 * a * std::abs(up[i]) + 1e-30;
    tol_u[i] = 16 * kEps32 * a * std::abs(R[i]) + 1e-30;
    tol_g[i] = 16 * kEps32 * a * a * std::abs(up[i] * R[i]) + 1e-30;
  }
  expect_within(yf.host(), y_ref, tol, "swiglu fwd fp32");
  be().swiglu_backward(dgf.p, duf.p, gf.p, uf.p, Rf.p, n);
  expect_within(dgf.host(), dgate, tol_g, "swiglu dgate fp32");
  expect_within(duf.host(), dup, tol_u, "swiglu dup fp32");
}

// Llama 3.1's frequency for pair i, written as Hugging Face writes it
// (_compute_llama3_parameters: two torch.where passes over the bands), apart
// from core/rope_params.h's rope_inv_freq, which every backend calls.
double llama3_inv_freq_reference(double theta, int64_t i, int64_t hs, double factor, double low, double high, double old) {
  const double inv = 1.0 / std::pow(theta, static_cast<double>(2 * i) / static_cast<double>(hs));
  const double wavelen = 2 * M_PI / inv;
  const double llama = wavelen > old / low ? inv / factor : inv;
  const double smooth = (old / wavelen - low) / (high - low);
  const bool medium = !(wavelen < old / high) && !(wavelen > old / low);
  return medium ? (1 - smooth) * llama / factor + smooth * llama : llama;
}

// Checks the rotary op for one RopeParams; inv_freq(i) is the reference
// frequency of pair i. Sequences of T rows; with a position table
// (`positions`, T entries) row n is at positions[n mod T], else at n mod T
// (the table is passed as null).
template <typename InvFreq>
void check_rope(const Backend& backend, const RopeParams& rope, InvFreq inv_freq, const char* what, int64_t T = 7,
                const std::vector<int32_t>& positions = {}) {
  // Hugging Face's rotate-half convention, checked against the definition on
  // odd shapes (grouped k/v heads, T = 7 of a run of 2 sequences); the map is
  // a rotation: backward(forward(x)) = x, norms of each (i, h + i) pair are
  // kept, the v heads are untouched, position 0 is the identity; its
  // gradient passes finite differences.
  Inputs in;
  const int64_t B = 2, H = 3, KV = 1, hs = 6, half = hs / 2, N = B * T, W = (H + 2 * KV) * hs;
  const int32_t* table = positions.empty() ? nullptr : positions.data();  // host: the fp64 kernel's
  ASSERT_TRUE(table == nullptr || static_cast<int64_t>(positions.size()) == T) << what;
  auto x = in.normal(N * W), R = in.normal(N * W);
  std::vector<double> y = x;
  cpu::rope_forward<double>(y.data(), N, T, H, KV, hs, rope, table);
  for (int64_t n = 0; n < N; ++n) {
    const int64_t pos = table != nullptr ? table[n % T] : n % T;
    for (int64_t h = 0; h < H + 2 * KV; ++h) {
      for (int64_t i = 0; i < half; ++i) {
        const double* xv = x.data() + n * W + h * hs;
        const double* yv = y.data() + n * W + h * hs;
        if (h >= H + KV) {  // v heads
          ASSERT_EQ(yv[i], xv[i]);
          ASSERT_EQ(yv[half + i], xv[half + i]);
          continue;
        }
        const double a = static_cast<double>(pos) * inv_freq(i);
        ASSERT_NEAR(yv[i], xv[i] * std::cos(a) - xv[half + i] * std::sin(a), 1e-13) << what << " " << n << " " << h << " " << i;
        ASSERT_NEAR(yv[half + i], xv[half + i] * std::cos(a) + xv[i] * std::sin(a), 1e-13) << what;
        if (pos == 0) {
          ASSERT_EQ(yv[i], xv[i]);
        }
      }
    }
  }
  std::vector<double> back = y;
  cpu::rope_backward<double>(back.data(), N, T, H, KV, hs, rope, table);
  for (size_t i = 0; i < x.size(); ++i) ASSERT_NEAR(back[i], x[i], 1e-13);
  // d(R . rope(x))/dx = rope_backward(R).
  std::vector<double> g = R;
  cpu::rope_backward<double>(g.data(), N, T, H, KV, hs, rope, table);
  auto loss = [&] {
    std::vector<double> z = x;
    cpu::rope_forward<double>(z.data(), N, T, H, KV, hs, rope, table);
    return dot(z, R);
  };
  fd_check(x, loss, g, (std::string(what) + " rope dx").c_str());
  // fp32: one product of |x| <= 4 with sin/cos rounded once (2 eps) per term.
  F32 xf(backend, x), gf(backend, R);
  std::unique_ptr<I32> pos_dev;  // the backend's copy of the table
  if (table != nullptr) pos_dev = std::make_unique<I32>(backend, positions);
  const int32_t* pos_arg = pos_dev ? pos_dev->p : nullptr;
  backend.rope_forward(xf.p, N, T, H, KV, hs, rope, pos_arg);
  expect_within(xf.host(), y, uniform_tol(y.size(), 4 * 4 * kEps32 * 2), (std::string(what) + " rope fwd fp32").c_str());
  backend.rope_backward(gf.p, N, T, H, KV, hs, rope, pos_arg);
  expect_within(gf.host(), g, uniform_tol(g.size(), 4 * 4 * kEps32 * 2), (std::string(what) + " rope bwd fp32").c_str());
}

TEST_P(Conformance, RotaryEmbeddings) {
  NEED_OPS(KernelOp::rope_forward, KernelOp::rope_backward);
  RopeParams plain;
  plain.theta = 10000;
  check_rope(be(), plain, [](int64_t i) { return std::pow(10000.0, -2.0 * static_cast<double>(i) / 6); }, "unscaled");
}

// With a position table: each rank's rows under context parallelism's
// load-balanced split (ring_split.h; cp = 3, chunks of 3: rank 1 holds
// positions 3 4 5 12 13 14), unscaled and with Llama 3.1's scaling, within
// the bounds above. In fp64 a rank's rows equal the same rows of the whole
// sequence rotated without a table.
TEST_P(Conformance, RotaryEmbeddingsWithAPositionTable) {
  NEED_OPS(KernelOp::rope_forward, KernelOp::rope_backward);
  const testing::RingSplit sp{3, 3};
  RopeParams plain, llama3;
  llama3.factor = 8;
  llama3.high_freq_factor = 16;
  llama3.original_max_positions = 1024;
  auto unscaled = [](int64_t i) { return std::pow(10000.0, -2.0 * static_cast<double>(i) / 6); };
  auto scaled = [](int64_t i) { return llama3_inv_freq_reference(10000, i, 6, 8, 1, 16, 1024); };
  for (int64_t r = 0; r < sp.cp; ++r) {
    SCOPED_TRACE("rank " + std::to_string(r));
    check_rope(be(), plain, unscaled, "table, unscaled", sp.local(), sp.positions(r));
    check_rope(be(), llama3, scaled, "table, llama3", sp.local(), sp.positions(r));
  }
  Inputs in;
  const int64_t B = 2, T = 2 * sp.cp * sp.Tc, H = 3, KV = 1, hs = 6, W = (H + 2 * KV) * hs;
  const auto x = in.normal(static_cast<size_t>(B * T * W));
  std::vector<double> whole = x;
  cpu::rope_forward<double>(whole.data(), B * T, T, H, KV, hs, llama3, nullptr);
  for (int64_t r = 0; r < sp.cp; ++r) {
    std::vector<double> part = testing::ring_gather(x, sp, r, B, T, W, 0, W);
    const std::vector<int32_t> pos = sp.positions(r);
    cpu::rope_forward<double>(part.data(), B * sp.local(), sp.local(), H, KV, hs, llama3, pos.data());
    expect_near_rel(part, testing::ring_gather(whole, sp, r, B, T, W, 0, W), 1e-13, "rank rows of the whole sequence");
  }
}

// A null table is the identity table pos[t] = t, bit for bit, forward and
// backward (so the model's calls without a table compute what they did
// before tables existed).
TEST_P(Conformance, RotaryEmbeddingsNullTableIsTheIdentityTable) {
  NEED_OPS(KernelOp::rope_forward, KernelOp::rope_backward);
  Inputs in;
  const int64_t B = 3, T = 37, H = 4, KV = 2, hs = 64, N = B * T, W = (H + 2 * KV) * hs;
  std::vector<int32_t> identity(static_cast<size_t>(T));
  for (int64_t t = 0; t < T; ++t) identity[static_cast<size_t>(t)] = static_cast<int32_t>(t);
  const auto x = in.normal(static_cast<size_t>(N * W));
  I32 table(be(), identity);
  RopeParams llama3;
  llama3.theta = 500000;
  llama3.factor = 8;
  llama3.original_max_positions = 16;
  for (const RopeParams& rope : {RopeParams{}, llama3}) {
    F32 fwd_null(be(), x), fwd_table(be(), x), bwd_null(be(), x), bwd_table(be(), x);
    be().rope_forward(fwd_null.p, N, T, H, KV, hs, rope, nullptr);
    be().rope_forward(fwd_table.p, N, T, H, KV, hs, rope, table.p);
    be().rope_backward(bwd_null.p, N, T, H, KV, hs, rope, nullptr);
    be().rope_backward(bwd_table.p, N, T, H, KV, hs, rope, table.p);
    const auto a = fwd_null.host(), b = fwd_table.host(), c = bwd_null.host(), d = bwd_table.host();
    for (size_t i = 0; i < a.size(); ++i) {
      ASSERT_EQ(std::bit_cast<uint32_t>(a[i]), std::bit_cast<uint32_t>(b[i])) << "forward, element " << i;
      ASSERT_EQ(std::bit_cast<uint32_t>(c[i]), std::bit_cast<uint32_t>(d[i])) << "backward, element " << i;
    }
    ASSERT_NE(a, std::vector<float>(x.begin(), x.end()));  // it did rotate
  }
}

TEST_P(Conformance, RotaryEmbeddingsLlama3Scaling) {
  NEED_OPS(KernelOp::rope_forward, KernelOp::rope_backward);
  // hs = 6: wavelengths 2 pi, 135 and 2917 positions; with an original
  // context of 1024, low 1 and high 16 (bands below 64, above 1024) pair 0
  // is kept, pair 1 smoothed and pair 2 divided by the factor: every band.
  RopeParams p;
  p.theta = 10000;
  p.factor = 8;
  p.low_freq_factor = 1;
  p.high_freq_factor = 16;
  p.original_max_positions = 1024;
  auto ref = [](int64_t i) { return llama3_inv_freq_reference(10000, i, 6, 8, 1, 16, 1024); };
  const double base[3] = {1, std::pow(10000.0, -1.0 / 3), std::pow(10000.0, -2.0 / 3)};
  ASSERT_EQ(ref(0), base[0]);                                     // high frequency: kept
  ASSERT_GT(ref(1), base[1] / 8);                                 // medium: between the two
  ASSERT_LT(ref(1), base[1]);
  ASSERT_NEAR(ref(2), base[2] / 8, 1e-18);                        // low frequency: divided
  for (int64_t i = 0; i < 3; ++i) ASSERT_NEAR(rope_inv_freq(p, i, 6), ref(i), 1e-15 * ref(i)) << i;
  check_rope(be(), p, ref, "llama3");
}

TEST_P(Conformance, Gelu) {
  NEED_OPS(KernelOp::gelu_forward, KernelOp::gelu_backward);
  Inputs in;
  const int64_t n = 101;
  auto x = in.normal(n, 3.0), R = in.normal(n);
  std::vector<double> y(n);
  auto loss = [&] {
    cpu::gelu_forward<double>(y.data(), x.data(), n);
    return dot(y, R);
  };
  loss();
  std::vector<double> y_ref = y, dx(n);
  cpu::gelu_backward<double>(dx.data(), x.data(), R.data(), n);
  fd_check(x, loss, dx, "gelu dx");
  // fp32 tanh is computed as 1 - 2/(exp(2u)+1): absolute error ~ a few eps32,
  // times |x| (<= 15) in y and in the derivative.
  F32 xf(be(), x), Rf(be(), R), yf(be(), n), dxf(be(), n);
  be().gelu_forward(yf.p, xf.p, n);
  std::vector<double> tol(n), tol_d(n);
  for (int64_t i = 0; i < n; ++i) {
    tol[i] = 16 * kEps32 * (1 + std::abs(x[i]));
    tol_d[i] = 16 * kEps32 * (1 + std::abs(x[i]) * (1 + x[i] * x[i])) * std::abs(R[i]) + 1e-30;
  }
  expect_within(yf.host(), y_ref, tol, "gelu fwd fp32");
  be().gelu_backward(dxf.p, xf.p, Rf.p, n);
  expect_within(dxf.host(), dx, tol_d, "gelu bwd fp32");
}

// bf16 values on a device: host values rounded to bf16 on the way in (the
// tests below give bf16 numbers, which fp64 holds exactly), widened on the
// way out.
constexpr double kUbf16 = 1.0 / 256;  // 2^-8, unit roundoff of bf16 (8-bit significand)
std::vector<double> bf16_values(std::vector<double> v) {
  for (auto& x : v) x = cpu::from_bf16(cpu::to_bf16(static_cast<float>(x)));
  return v;
}
struct Bf16Buf {
  const Backend& be;
  uint16_t* p;
  size_t n;
  Bf16Buf(const Backend& b, size_t count) : be(b), n(count) {
    p = static_cast<uint16_t*>(be.alloc(static_cast<int64_t>(n * 2)));
    be.fill(p, DType::bf16, 0.0, static_cast<int64_t>(n));
  }
  Bf16Buf(const Backend& b, const std::vector<double>& v) : Bf16Buf(b, v.size()) {
    std::vector<uint16_t> h(n);
    for (size_t i = 0; i < n; ++i) h[i] = cpu::to_bf16(static_cast<float>(v[i]));
    be.copy(p, h.data(), static_cast<int64_t>(n * 2), CopyKind::host_to_device);
  }
  Bf16Buf(const Bf16Buf&) = delete;
  Bf16Buf& operator=(const Bf16Buf&) = delete;
  ~Bf16Buf() { be.release(p); }
  std::vector<float> host() const {
    std::vector<uint16_t> h(n);
    be.copy(h.data(), p, static_cast<int64_t>(n * 2), CopyKind::device_to_host);
    std::vector<float> f(n);
    for (size_t i = 0; i < n; ++i) f[i] = cpu::from_bf16(h[i]);
    return f;
  }
};
// A bf16 output: its fp32 value within `tol` of ref, then rounded to bf16
// (nearest: at most u of its magnitude), so within u |ref| + (1 + u) tol.
std::vector<double> bf16_output_tol(const std::vector<double>& ref, const std::vector<double>& tol) {
  std::vector<double> t(ref.size());
  for (size_t i = 0; i < ref.size(); ++i) t[i] = kUbf16 * std::abs(ref[i]) + (1 + kUbf16) * tol[i];
  return t;
}

// The bf16 forms (train.precision = "bf16"): bf16 pre-activations in, a bf16
// output or fp32 gradients out, fp32 arithmetic. On bf16 inputs the fp32
// bounds of the Gelu and Swiglu cases hold for the arithmetic; the output's
// rounding adds u |y| (bf16_output_tol). The gradients are fp32.
TEST_P(Conformance, GeluAndSwigluBf16) {
  NEED_OPS(KernelOp::gelu_forward_bf16, KernelOp::gelu_backward_bf16, KernelOp::swiglu_forward_bf16,
           KernelOp::swiglu_backward_bf16);
  Inputs in;
  const int64_t n = 101;
  const std::vector<double> x = bf16_values(in.normal(n, 3.0)), up = bf16_values(in.normal(n)), R = in.normal(n);
  std::vector<double> y(n), dx(n), dgate(n), dup(n);
  std::vector<double> tol(n), tol_d(n), tol_s(n), tol_g(n), tol_u(n);
  for (int64_t i = 0; i < n; ++i) {  // the fp32 cases' bounds (gate = x)
    const double a = std::abs(x[i]) + 1;
    tol[i] = 16 * kEps32 * (1 + std::abs(x[i]));
    tol_d[i] = 16 * kEps32 * (1 + std::abs(x[i]) * (1 + x[i] * x[i])) * std::abs(R[i]) + 1e-30;
    tol_s[i] = 16 * kEps32 * a * std::abs(up[i]) + 1e-30;
    tol_u[i] = 16 * kEps32 * a * std::abs(R[i]) + 1e-30;
    tol_g[i] = 16 * kEps32 * a * a * std::abs(up[i] * R[i]) + 1e-30;
  }
  Bf16Buf xb(be(), x), ub(be(), up), yb(be(), n);
  F32 Rf(be(), R), df(be(), n), duf(be(), n);
  cpu::gelu_forward<double>(y.data(), x.data(), n);
  be().gelu_forward_bf16(yb.p, xb.p, n);
  expect_within(yb.host(), y, bf16_output_tol(y, tol), "gelu fwd bf16");
  cpu::gelu_backward<double>(dx.data(), x.data(), R.data(), n);
  be().gelu_backward_bf16(df.p, xb.p, Rf.p, n);
  expect_within(df.host(), dx, tol_d, "gelu bwd bf16");
  be().gelu_backward_bf16(Rf.p, xb.p, Rf.p, n);  // in place, as the model runs it
  expect_within(Rf.host(), dx, tol_d, "gelu bwd bf16 in place");
  F32 R2(be(), R);
  cpu::swiglu_forward<double>(y.data(), x.data(), up.data(), n);
  be().swiglu_forward_bf16(yb.p, xb.p, ub.p, n);
  expect_within(yb.host(), y, bf16_output_tol(y, tol_s), "swiglu fwd bf16");
  cpu::swiglu_backward<double>(dgate.data(), dup.data(), x.data(), up.data(), R.data(), n);
  be().swiglu_backward_bf16(df.p, R2.p, xb.p, ub.p, R2.p, n);  // dup over dout, as the model runs it
  expect_within(df.host(), dgate, tol_g, "swiglu dgate bf16");
  expect_within(R2.host(), dup, tol_u, "swiglu dup bf16");
}

// The fp64 gradients of a linear layer (ops.h: LinearBackwardFn) and their
// bounds on fp32-representable inputs: dx = dy W, dW = dW0 + dy^T x,
// db = db0 + sum_n dy, each a sum of K terms (K = O, N, N) plus what the
// output held, within (K + 2) 2^-24 (sum |terms| + |held|): fp32
// accumulation, plus one rounding per product where the inputs are fp32
// (bf16 inputs multiply exactly in fp32).
struct LinearBackwardRef {
  std::vector<double> dx, dW, db;
  std::vector<double> tol_dx, tol_dW, tol_db;
};
LinearBackwardRef linear_backward_ref(const std::vector<double>& dy, const std::vector<double>& x,
                                      const std::vector<double>& W, const std::vector<double>& dW0,
                                      const std::vector<double>& db0, int64_t N, int64_t I, int64_t O) {
  LinearBackwardRef r{std::vector<double>(N * I), dW0, db0, std::vector<double>(N * I), std::vector<double>(O * I),
                      std::vector<double>(O)};
  for (int64_t n = 0; n < N; ++n)
    for (int64_t i = 0; i < I; ++i) {
      double sum = 0, mag = 0;
      for (int64_t o = 0; o < O; ++o) sum += dy[n * O + o] * W[o * I + i], mag += std::abs(dy[n * O + o] * W[o * I + i]);
      r.dx[n * I + i] = sum;
      r.tol_dx[n * I + i] = (O + 2) * kEps32 * mag + 1e-30;
    }
  for (int64_t o = 0; o < O; ++o) {
    for (int64_t i = 0; i < I; ++i) {
      double mag = std::abs(dW0[o * I + i]);
      for (int64_t n = 0; n < N; ++n) r.dW[o * I + i] += dy[n * O + o] * x[n * I + i], mag += std::abs(dy[n * O + o] * x[n * I + i]);
      r.tol_dW[o * I + i] = (N + 2) * kEps32 * mag + 1e-30;
    }
    double mag = std::abs(db0[o]);
    for (int64_t n = 0; n < N; ++n) r.db[o] += dy[n * O + o], mag += std::abs(dy[n * O + o]);
    r.tol_db[o] = (N + 2) * kEps32 * mag + 1e-30;
  }
  return r;
}

// The bf16 linear layers (ops.h) against fp64 on bf16 numbers (x, W, and
// dy chosen bf16 so its rounding into the cast workspace is exact): every
// product exact in fp32, so the bound is fp32 accumulation alone,
// (K + 2) 2^-24 sum |terms| (+ the bias, + what dW and db held). Shapes
// span several 64-wide tiles and 32-deep k steps with ragged edges.
TEST_P(Conformance, LinearBf16AcrossTiles) {
  NEED_OPS(KernelOp::linear_forward_bf16, KernelOp::linear_backward_bf16, KernelOp::cast);
  Inputs in;
  const int64_t N = 70, I = 75, O = 130;
  const auto x = bf16_values(in.normal(N * I)), W = bf16_values(in.normal(O * I, 0.5)), dy = bf16_values(in.normal(N * O));
  const auto b = in.normal(O), dW0 = in.normal(O * I), db0 = in.normal(O);
  std::vector<double> y(N * O), ty(N * O);
  for (int64_t n = 0; n < N; ++n)
    for (int64_t o = 0; o < O; ++o) {
      double sum = b[o], mag = std::abs(b[o]);
      for (int64_t i = 0; i < I; ++i) sum += x[n * I + i] * W[o * I + i], mag += std::abs(x[n * I + i] * W[o * I + i]);
      y[n * O + o] = sum;
      ty[n * O + o] = (I + 2) * kEps32 * mag + 1e-30;
    }
  const LinearBackwardRef g = linear_backward_ref(dy, x, W, dW0, db0, N, I, O);
  Bf16Buf xb(be(), x), Wb(be(), W), cast(be(), N * O);
  F32 bf(be(), b), yf(be(), N * O), dyf(be(), dy), dxf(be(), N * I), dWf(be(), dW0), dbf(be(), db0);
  be().linear_forward_bf16(yf.p, xb.p, Wb.p, bf.p, N, I, O);
  expect_within(yf.host(), y, ty, "bf16 linear y");
  be().linear_backward_bf16(dxf.p, dWf.p, dbf.p, dyf.p, xb.p, Wb.p, N, I, O, false, cast.p);
  expect_within(dxf.host(), g.dx, g.tol_dx, "bf16 linear dx");
  expect_within(dWf.host(), g.dW, g.tol_dW, "bf16 linear dW");
  expect_within(dbf.host(), g.db, g.tol_db, "bf16 linear db");
}

// The GELU MLP's fused bf16 ops (ops.h; cuBLASLt epilogues on cuda, the
// linear op and a GELU pass on gpu-emu) against fp64 on bf16 x, W and pre,
// within linear_gelu_bound.h's bounds. The backward is the next layer's
// (W2[I, O]) on what the forward wrote, adding to non-zero dW and db.
TEST_P(Conformance, LinearGeluBf16Fused) {
  NEED_OPS(KernelOp::linear_gelu_forward_bf16, KernelOp::linear_backward_gelu_bf16);
  Inputs in;
  for (const auto& [N, I, O] : {std::array<int64_t, 3>{7, 24, 40}, std::array<int64_t, 3>{33, 16, 19}}) {
    const std::vector<double> x = bf16_values(in.normal(N * I)), W = bf16_values(in.normal(O * I, 0.5)),
                              b = in.normal(O);
    const testing::LinearGeluForwardRef f = testing::linear_gelu_forward_ref(x, W, b, N, I, O);
    Bf16Buf xb(be(), x), Wb(be(), W), actb(be(), N * O), preb(be(), N * O);
    F32 bf(be(), b), work(be(), static_cast<size_t>(N * O));
    be().linear_gelu_forward_bf16(actb.p, preb.p, xb.p, Wb.p, bf.p, N, I, O, work.p);
    const std::vector<float> pre = preb.host(), act = actb.host();
    expect_within(pre, f.pre, f.tol_pre, "linear_gelu pre");
    expect_within(act, f.act, f.tol_act, "linear_gelu act");

    const int64_t I2 = O, O2 = I;
    const std::vector<double> W2 = bf16_values(in.normal(O2 * I2, 0.5)), dy = in.normal(N * O2),
                              dW0 = in.normal(O2 * I2), db0 = in.normal(O2);
    const testing::LinearGeluBackwardRef g = testing::linear_backward_gelu_ref(
        dy, {act.begin(), act.end()}, W2, {pre.begin(), pre.end()}, dW0, db0, N, I2, O2);
    Bf16Buf W2b(be(), W2), cast(be(), N * O2);
    F32 dyf(be(), dy), dpref(be(), static_cast<size_t>(N * I2)), dWf(be(), dW0), dbf(be(), db0);
    be().linear_backward_gelu_bf16(dpref.p, dWf.p, dbf.p, dyf.p, actb.p, W2b.p, preb.p, N, I2, O2, cast.p);
    expect_within(dpref.host(), g.dpre, g.tol_dpre, "linear_backward_gelu dpre");
    expect_within(dWf.host(), g.dW, g.tol_dW, "linear_backward_gelu dW (accumulated)");
    expect_within(dbf.host(), g.db, g.tol_db, "linear_backward_gelu db (accumulated)");
  }
}

// --- The linear backwards split in two (ops.h: dW and db may be null, and
// dx but for the fused GELU form's dpre). A zero-bubble pipeline schedule
// runs a layer's backward as B (the input gradient alone) and later W (dW
// and db alone). On one backend every part must give the full call's bits
// for what it is given, and leave what it is not given as it was; the
// values themselves are the full call's, which the cases above bound.

// A linear backward on fixed device inputs, writing the outputs it is given
// (device memory; null: not asked for). The fused GELU form ignores
// accumulate_dx (it overwrites dpre).
using LinearBackwardCall = std::function<void(float* dx, float* dW, float* db, bool accumulate_dx)>;

void expect_same_bits(const std::vector<float>& got, const std::vector<float>& want, const std::string& what) {
  ASSERT_EQ(got.size(), want.size()) << what;
  for (size_t i = 0; i < want.size(); ++i) {
    ASSERT_EQ(std::bit_cast<uint32_t>(got[i]), std::bit_cast<uint32_t>(want[i])) << what << ", element " << i;
  }
}

// Output buffers dx[N,I], dW[O,I], db[O] starting at non-zero values, so
// that both an overwrite and an accumulation show.
struct LinearGradBufs {
  F32 dx, dW, db;
  LinearGradBufs(const Backend& be, const std::vector<double>& dx0, const std::vector<double>& dW0,
                 const std::vector<double>& db0)
      : dx(be, dx0), dW(be, dW0), db(be, db0) {}
  std::array<std::vector<float>, 3> host() const { return {dx.host(), dW.host(), db.host()}; }
};

// Runs `backward` with every subset of its outputs (bit 0 dx, 1 dW, 2 db;
// dx in every subset where `dx_required`) on fresh buffers, accumulate_dx
// false and true (false alone where `dx_required`), and checks each output
// it was given against the full call's bits and each it was not against its
// initial bits. Where dx is optional, also the split on one set of buffers:
// B (dx alone) then W (dW and db alone) equals the full call.
void expect_backward_subsets_match_the_full_call(const Backend& be, const LinearBackwardCall& backward,
                                                 bool dx_required, const std::vector<double>& dx0,
                                                 const std::vector<double>& dW0, const std::vector<double>& db0,
                                                 const std::string& what) {
  const char* names[3] = {"dx", "dW", "db"};
  for (bool acc : {false, true}) {
    if (acc && dx_required) continue;
    LinearGradBufs full(be, dx0, dW0, db0);
    const std::array<std::vector<float>, 3> initial = full.host();
    backward(full.dx.p, full.dW.p, full.db.p, acc);
    const std::array<std::vector<float>, 3> want = full.host();
    for (int mask = 0; mask < 7; ++mask) {
      if (dx_required && (mask & 1) == 0) continue;
      LinearGradBufs part(be, dx0, dW0, db0);
      backward((mask & 1) ? part.dx.p : nullptr, (mask & 2) ? part.dW.p : nullptr, (mask & 4) ? part.db.p : nullptr,
               acc);
      const std::array<std::vector<float>, 3> got = part.host();
      for (int k = 0; k < 3; ++k) {
        const std::string at = what + " given {" + ((mask & 1) ? "dx" : "") + ((mask & 2) ? " dW" : "") +
                               ((mask & 4) ? " db" : "") + " }, accumulate_dx " + (acc ? "on" : "off") + ": " +
                               names[k] + ((mask >> k) & 1 ? " (the full call's)" : " (untouched)");
        ASSERT_NO_FATAL_FAILURE(expect_same_bits(got[k], (mask >> k) & 1 ? want[k] : initial[k], at));
      }
    }
    if (dx_required) continue;
    LinearGradBufs split(be, dx0, dW0, db0);
    backward(split.dx.p, nullptr, nullptr, acc);  // B
    backward(nullptr, split.dW.p, split.db.p, acc);  // W
    const std::array<std::vector<float>, 3> got = split.host();
    for (int k = 0; k < 3; ++k) {
      ASSERT_NO_FATAL_FAILURE(expect_same_bits(got[k], want[k], what + " split B then W, accumulate_dx " +
                                                                     (acc ? "on" : "off") + ": " + names[k]));
    }
  }
}

// Shapes {N, I, O}: within one tile, and across several 64-wide tiles and
// 32-deep k steps with ragged edges (the dialect's GEMMs).
constexpr std::array<std::array<int64_t, 3>, 2> kLinearSplitShapes = {{{7, 19, 11}, {70, 75, 130}}};

// A linear backward split into B (dx alone) and W (dW and db alone): every
// subset of outputs against the full call, then each half alone against the
// fp64 reference (linear_backward_ref's bounds); `name` in the messages.
void expect_split_backward(const Backend& be, const LinearBackwardCall& backward, const std::vector<double>& dy,
                           const std::vector<double>& x, const std::vector<double>& W, const std::vector<double>& dx0,
                           const std::vector<double>& dW0, const std::vector<double>& db0, int64_t N, int64_t I,
                           int64_t O, const std::string& name) {
  ASSERT_NO_FATAL_FAILURE(expect_backward_subsets_match_the_full_call(be, backward, false, dx0, dW0, db0, name));
  const LinearBackwardRef g = linear_backward_ref(dy, x, W, dW0, db0, N, I, O);
  LinearGradBufs out(be, dx0, dW0, db0);
  backward(out.dx.p, nullptr, nullptr, false);
  backward(nullptr, out.dW.p, out.db.p, false);
  expect_within(out.dx.host(), g.dx, g.tol_dx, (name + " B: dx").c_str());
  expect_within(out.dW.host(), g.dW, g.tol_dW, (name + " W: dW (accumulated)").c_str());
  expect_within(out.db.host(), g.db, g.tol_db, (name + " W: db (accumulated)").c_str());
}

TEST_P(Conformance, LinearBackwardSplitsIntoInputAndWeightGradients) {
  NEED_OPS(KernelOp::linear_backward);
  Inputs in;
  for (const auto& [N, I, O] : kLinearSplitShapes) {
    const auto x = in.normal(N * I), W = in.normal(O * I), dy = in.normal(N * O);
    const auto dx0 = in.normal(N * I), dW0 = in.normal(O * I), db0 = in.normal(O);
    F32 xf(be(), x), Wf(be(), W), dyf(be(), dy);
    const LinearBackwardCall backward = [&](float* dx, float* dW, float* db, bool acc) {
      be().linear_backward(dx, dW, db, dyf.p, xf.p, Wf.p, N, I, O, acc);
    };
    expect_split_backward(be(), backward, dy, x, W, dx0, dW0, db0, N, I, O, "linear_backward");
  }
}

// The bf16 form: each part rounds dy into the cast workspace for the
// products it runs (dy chosen bf16, so the bounds are LinearBf16AcrossTiles').
TEST_P(Conformance, LinearBf16BackwardSplitsIntoInputAndWeightGradients) {
  NEED_OPS(KernelOp::linear_backward_bf16);
  Inputs in;
  for (const auto& [N, I, O] : kLinearSplitShapes) {
    const auto x = bf16_values(in.normal(N * I)), W = bf16_values(in.normal(O * I, 0.5)), dy = bf16_values(in.normal(N * O));
    const auto dx0 = in.normal(N * I), dW0 = in.normal(O * I), db0 = in.normal(O);
    Bf16Buf xb(be(), x), Wb(be(), W), cast(be(), N * O);
    F32 dyf(be(), dy);
    const LinearBackwardCall backward = [&](float* dx, float* dW, float* db, bool acc) {
      be().linear_backward_bf16(dx, dW, db, dyf.p, xb.p, Wb.p, N, I, O, acc, cast.p);
    };
    expect_split_backward(be(), backward, dy, x, W, dx0, dW0, db0, N, I, O, "linear_backward_bf16");
  }
}

// The fused GELU backward without dW or db: dpre is the full call's. A
// zero-bubble schedule runs its W half as linear_backward_bf16 with dx null
// on the same input act = gelu(pre), which gives the fused call's dW and db.
TEST_P(Conformance, LinearBackwardGeluBf16WithoutWeightGradients) {
  NEED_OPS(KernelOp::linear_backward_gelu_bf16, KernelOp::linear_backward_bf16);
  Inputs in;
  for (const auto& [N, I, O] : {std::array<int64_t, 3>{7, 40, 24}, std::array<int64_t, 3>{33, 19, 16}}) {
    // The layer's input act[N,I] = bf16(gelu(pre)), pre[N,I] bf16 numbers.
    const std::vector<double> pre = bf16_values(in.normal(N * I, 2.0));
    std::vector<double> act(pre.size());
    cpu::gelu_forward<double>(act.data(), pre.data(), N * I);
    act = bf16_values(act);
    const std::vector<double> W = bf16_values(in.normal(O * I, 0.5)), dy = in.normal(N * O);
    const auto dpre0 = in.normal(N * I), dW0 = in.normal(O * I), db0 = in.normal(O);
    Bf16Buf actb(be(), act), preb(be(), pre), Wb(be(), W), cast(be(), N * O);
    F32 dyf(be(), dy);
    const LinearBackwardCall fused = [&](float* dpre, float* dW, float* db, bool) {
      be().linear_backward_gelu_bf16(dpre, dW, db, dyf.p, actb.p, Wb.p, preb.p, N, I, O, cast.p);
    };
    ASSERT_NO_FATAL_FAILURE(expect_backward_subsets_match_the_full_call(be(), fused, true, dpre0, dW0, db0,
                                                                        "linear_backward_gelu_bf16"));
    LinearGradBufs full(be(), dpre0, dW0, db0), split(be(), dpre0, dW0, db0);
    fused(full.dx.p, full.dW.p, full.db.p, false);
    fused(split.dx.p, nullptr, nullptr, false);                                                          // B
    be().linear_backward_bf16(nullptr, split.dW.p, split.db.p, dyf.p, actb.p, Wb.p, N, I, O, false, cast.p);  // W
    const std::array<std::vector<float>, 3> want = full.host(), got = split.host();
    expect_same_bits(got[0], want[0], "linear_backward_gelu_bf16 split: dpre");
    expect_same_bits(got[1], want[1], "linear_backward_gelu_bf16 split: dW (W by linear_backward_bf16)");
    expect_same_bits(got[2], want[2], "linear_backward_gelu_bf16 split: db (W by linear_backward_bf16)");
    const testing::LinearGeluBackwardRef g = testing::linear_backward_gelu_ref(dy, act, W, pre, dW0, db0, N, I, O);
    expect_within(got[0], g.dpre, g.tol_dpre, "linear_backward_gelu_bf16 B: dpre");
    expect_within(got[1], g.dW, g.tol_dW, "linear_backward_gelu_bf16 W: dW (accumulated)");
    expect_within(got[2], g.db, g.tol_db, "linear_backward_gelu_bf16 W: db (accumulated)");
  }
}

// The norms' bf16 forms: the fp32 arithmetic and statistics of the
// LayerNorm and RmsNorm cases (their bound t), the output rounded to bf16
// (bf16_output_tol: u |y| on top).
TEST_P(Conformance, NormsBf16) {
  NEED_OPS(KernelOp::layernorm_forward_bf16, KernelOp::rmsnorm_forward_bf16);
  Inputs in;
  const int64_t N = 5, C = 37;
  const float eps = 1e-5f;
  auto x = in.normal(N * C, 2.0), g = in.normal(C), b = in.normal(C);
  std::vector<double> mean(N), rstd(N), y(N * C);
  const double t = 4 * C * kEps32 * std::sqrt(static_cast<double>(C)) * 16.0;
  F32 xf(be(), x), gf(be(), g), bf(be(), b), mf(be(), N), rf(be(), N);
  Bf16Buf yb(be(), N * C);
  cpu::layernorm_forward<double>(y.data(), mean.data(), rstd.data(), x.data(), g.data(), b.data(), N, C);
  be().layernorm_forward_bf16(yb.p, mf.p, rf.p, xf.p, gf.p, bf.p, N, C);
  expect_within(yb.host(), y, bf16_output_tol(y, uniform_tol(y.size(), t)), "layernorm fwd bf16");
  expect_within(mf.host(), mean, uniform_tol(N, t), "layernorm mean (bf16 form)");
  expect_within(rf.host(), rstd, uniform_tol(N, t), "layernorm rstd (bf16 form)");
  cpu::rmsnorm_forward<double>(y.data(), rstd.data(), x.data(), g.data(), N, C, eps);
  be().rmsnorm_forward_bf16(yb.p, rf.p, xf.p, gf.p, N, C, eps);
  expect_within(yb.host(), y, bf16_output_tol(y, uniform_tol(y.size(), t)), "rmsnorm fwd bf16");
  expect_within(rf.host(), rstd, uniform_tol(N, t), "rmsnorm rstd (bf16 form)");
}

// Attention shapes {B, T, H, KV, hs}: multi-head, one head, grouped-query,
// T = 70 and T = 131 with a head size of 67 span more than one flash tile of
// queries and keys (64 each) and more than one 64-column block of the tile
// products, with remainders everywhere.
constexpr std::array<std::array<int64_t, 5>, 5> kAttentionShapes = {
    {{2, 7, 3, 3, 4}, {1, 13, 1, 1, 10}, {2, 9, 4, 2, 3}, {1, 70, 2, 1, 5}, {1, 131, 4, 2, 67}}};
// {B, T, H, KV, hs} the tile flash kernels take (flash_tc_fits): T and hs
// multiples of 16, hs <= 128; T = 80 and 144 walk two and three key tiles.
constexpr std::array<std::array<int64_t, 5>, 3> kFlashTileShapes = {{{2, 80, 4, 2, 32}, {1, 48, 2, 2, 16}, {1, 144, 2, 1, 128}}};

TEST_P(Conformance, Attention) {
  NEED_OPS(KernelOp::attention_forward, KernelOp::attention_backward);
  Inputs in;
  for (auto [B, T, H, KV, hs] : kAttentionShapes) {
    const int64_t C = H * hs, W = (H + 2 * KV) * hs;
    auto qkv = in.normal(B * T * W), R = in.normal(B * T * C);
    std::vector<double> y(B * T * C), P(B * H * T * T);
    auto loss = [&] {
      cpu::attention_forward<double>(y.data(), P.data(), qkv.data(), B, T, H, KV, hs);
      return dot(y, R);
    };
    loss();
    std::vector<double> y_ref = y, P_ref = P, dqkv(qkv.size());
    // Causality and normalisation: each probability row sums to 1 and is 0 above the diagonal.
    for (int64_t r = 0; r < B * H * T; ++r) {
      const int64_t t = r % T;
      double sum = 0;
      for (int64_t j = 0; j < T; ++j) {
        if (j > t) {
          ASSERT_EQ(P[r * T + j], 0.0);
        }
        sum += P[r * T + j];
      }
      ASSERT_NEAR(sum, 1.0, 1e-12);
    }
    cpu::attention_backward<double>(dqkv.data(), R.data(), qkv.data(), P.data(), B, T, H, KV, hs);
    if (T <= 13) fd_check(qkv, loss, dqkv, "attention dqkv");
    // fp32: scores are dots of length hs, softmax sums of length T.
    F32 qf(be(), qkv), Rf(be(), R), yf(be(), y.size()), Pf(be(), P.size()), dqf(be(), qkv.size());
    be().attention_forward(yf.p, Pf.p, qf.p, B, T, H, KV, hs);
    const double t = (hs + T + 8) * kEps32 * hs * 16.0;
    expect_within(Pf.host(), P_ref, uniform_tol(P_ref.size(), t), "attention probs fp32");
    expect_within(yf.host(), y_ref, uniform_tol(y_ref.size(), 4 * t), "attention out fp32");
    be().attention_backward(dqf.p, Rf.p, qf.p, Pf.p, B, T, H, KV, hs);
    expect_within(dqf.host(), dqkv, uniform_tol(dqkv.size(), T * 16 * t), "attention dqkv fp32");
  }
}

TEST_P(Conformance, FlashAttentionMatchesTheReferenceAndFiniteDifferences) {
  NEED_OPS(KernelOp::flash_attention_forward, KernelOp::flash_attention_backward);
  // The fp64 flash kernels equal the fp64 naive ones up to rounding (the
  // online softmax reorders the same sums: 1e-12 relative is ~1e4 ulps of
  // slack), lse is the log of the softmax denominator computed directly, the
  // flash backward passes its own finite-difference check; the backend's
  // fp32 flash kernels meet the naive kernels' fp32 bounds plus one
  // rescaling rounding per key tile.
  Inputs in;
  for (auto [B, T, H, KV, hs] : kAttentionShapes) {
    const int64_t C = H * hs, W = (H + 2 * KV) * hs;
    auto qkv = in.normal(B * T * W), R = in.normal(B * T * C);
    std::vector<double> y(B * T * C), P(B * H * T * T), yf64(B * T * C), lse(B * H * T);
    cpu::attention_forward<double>(y.data(), P.data(), qkv.data(), B, T, H, KV, hs);
    auto loss = [&] {
      cpu::flash_attention_forward<double>(yf64.data(), lse.data(), qkv.data(), B, T, H, KV, hs);
      return dot(yf64, R);
    };
    loss();
    for (size_t i = 0; i < y.size(); ++i) ASSERT_NEAR(yf64[i], y[i], 1e-12 * (1 + std::abs(y[i]))) << "flash out " << i;
    const double scale = 1.0 / std::sqrt(static_cast<double>(hs));
    for (int64_t b = 0; b < B; ++b) {
      for (int64_t h = 0; h < H; ++h) {
        const int64_t g = h / (H / KV);
        for (int64_t t = 0; t < T; ++t) {
          double z = 0;  // sum_s exp(S[t,s]) by the definition
          for (int64_t s = 0; s <= t; ++s) {
            double sc = 0;
            for (int64_t i = 0; i < hs; ++i) sc += qkv[(b * T + t) * W + h * hs + i] * qkv[(b * T + s) * W + (H + g) * hs + i];
            z += std::exp(sc * scale);
          }
          ASSERT_NEAR(lse[(b * H + h) * T + t], std::log(z), 1e-12 * (1 + std::abs(std::log(z)))) << "lse";
        }
      }
    }
    std::vector<double> dnaive(qkv.size()), dflash(qkv.size());
    cpu::attention_backward<double>(dnaive.data(), R.data(), qkv.data(), P.data(), B, T, H, KV, hs);
    cpu::flash_attention_backward<double>(dflash.data(), R.data(), qkv.data(), yf64.data(), lse.data(), B, T, H, KV, hs);
    for (size_t i = 0; i < dnaive.size(); ++i) {
      ASSERT_NEAR(dflash[i], dnaive[i], 1e-11 * (1 + std::abs(dnaive[i]))) << "flash dqkv " << i;
    }
    if (T <= 13) fd_check(qkv, loss, dflash, "flash attention dqkv");
    F32 qf(be(), qkv), Rf(be(), R), yf(be(), y.size()), lf(be(), lse.size()), dqf(be(), qkv.size());
    be().flash_attention_forward(yf.p, lf.p, qf.p, B, T, H, KV, hs);
    const double tiles = static_cast<double>((T + 63) / 64);
    const double t = (hs + T + tiles + 8) * kEps32 * hs * 16.0;
    expect_within(yf.host(), y, uniform_tol(y.size(), 4 * t), "flash out fp32");
    // lse = m + log l: |m| <= hs * 16 * scale, log l in [0, log T]; error of the scores (t) plus log's.
    expect_within(lf.host(), lse, uniform_tol(lse.size(), t + 8 * kEps32 * (hs * 16 + std::log(T))), "flash lse fp32");
    be().flash_attention_backward(dqf.p, Rf.p, qf.p, yf.p, lf.p, B, T, H, KV, hs);
    expect_within(dqf.host(), dnaive, uniform_tol(dnaive.size(), T * 16 * t), "flash dqkv fp32");
  }
}

// The bf16 flash kernels (train.precision = "bf16") against fp64 on the
// same inputs (qkv bf16 numbers, as the kernels read them from bf16 storage;
// dout fp32), within the first-order bound of flash_bf16_bound.h, derived
// from where they round. Shapes: kAttentionShapes (odd sizes: the scalar
// kernels on the GPU backends) and kFlashTileShapes (T and hs multiples of
// 16: the tile-primitive kernels of flash_attention_tc.cuh there, with more
// than one key tile, grouped heads, head sizes 16 to 128). The worst error
// must also reach 1% of its bound, so fp32 products would fail the test.
TEST_P(Conformance, FlashAttentionBf16MatchesFp64WithinTheDerivedBound) {
  NEED_OPS(KernelOp::flash_attention_forward_bf16, KernelOp::flash_attention_backward_bf16, KernelOp::cast);
  Inputs in;
  std::array<double, 2> worst_y{}, worst_d{};  // [scalar shapes, tile shapes]
  std::vector<std::array<int64_t, 5>> shapes(kAttentionShapes.begin(), kAttentionShapes.end());
  shapes.insert(shapes.end(), kFlashTileShapes.begin(), kFlashTileShapes.end());
  const bool emu = std::string(be().name) == "gpu-emu";
  for (size_t k = 0; k < shapes.size(); ++k) {
    const auto [B, T, H, KV, hs] = shapes[k];
    const size_t tile = k < kAttentionShapes.size() ? 0 : 1;
    const int64_t tile_launches = emu ? gpu_emu_launches(be(), "flash_attention_forward_tc_k") : 0;
    const int64_t C = H * hs, W = (H + 2 * KV) * hs;
    auto qkv = bf16_values(in.normal(B * T * W)), R = in.normal(B * T * C);
    std::vector<double> y(B * T * C), lse(B * H * T), dqkv(qkv.size());
    cpu::flash_attention_forward<double>(y.data(), lse.data(), qkv.data(), B, T, H, KV, hs);
    cpu::flash_attention_backward<double>(dqkv.data(), R.data(), qkv.data(), y.data(), lse.data(), B, T, H, KV, hs);
    const auto [tol_y, tol_l, tol_d] = testing::flash_bf16_bounds(qkv, R, y, lse, B, T, H, KV, hs);
    Bf16Buf qf(be(), qkv);
    F32 Rf(be(), R), yf(be(), y.size()), lf(be(), lse.size()), dqf(be(), qkv.size());
    be().flash_attention_forward_bf16(yf.p, lf.p, qf.p, B, T, H, KV, hs);
    const auto yh = yf.host(), lh = lf.host();
    expect_within(yh, y, tol_y, "bf16 flash out");
    expect_within(lh, lse, tol_l, "bf16 flash lse");
    Bf16Buf yb(be(), y.size());  // the output as the model keeps it for backward
    be().cast(yb.p, DType::bf16, yf.p, DType::f32, static_cast<int64_t>(y.size()));
    be().flash_attention_backward_bf16(dqf.p, Rf.p, qf.p, yb.p, lf.p, B, T, H, KV, hs);
    const auto dh = dqf.host();
    expect_within(dh, dqkv, tol_d, "bf16 flash dqkv");
    for (size_t i = 0; i < y.size(); ++i) worst_y[tile] = std::max(worst_y[tile], std::abs(yh[i] - y[i]) / tol_y[i]);
    for (size_t i = 0; i < dqkv.size(); ++i) worst_d[tile] = std::max(worst_d[tile], std::abs(dh[i] - dqkv[i]) / tol_d[i]);
    if (emu) {
      EXPECT_EQ(gpu_emu_launches(be(), "flash_attention_forward_tc_k") - tile_launches, static_cast<int64_t>(tile))
          << "T " << T << ", hs " << hs << ": the tile kernel runs exactly where flash_tc_fits";
    }
  }
  for (size_t tile : {0, 1}) {
    EXPECT_GT(worst_y[tile], 0.01) << "bf16 flash out looks like fp32 products (shape set " << tile << ")";
    EXPECT_GT(worst_d[tile], 0.01) << "bf16 flash dqkv looks like fp32 products (shape set " << tile << ")";
    std::printf("worst error / bound, %s shapes: out %.3f, dqkv %.3f\n", tile ? "tile" : "odd", worst_y[tile],
                worst_d[tile]);
  }
}

// copy_columns, ring attention's pack and unpack: the k,v columns [C, C+Wk)
// of qkv[N, W] into a contiguous kv[N, Wk] (src = qkv + C, ld_dst = cols),
// dkv[N, Wk] back into dqkv's k,v columns (dst = dqkv + C, ld_dst > cols), a
// strided block with both leading dimensions above cols and offsets on both
// sides, and empty copies. A copy is exact: every element equals a host
// loop's, bit for bit, and every element outside the copied block keeps
// what it held.
TEST_P(Conformance, CopyColumns) {
  NEED_OPS(KernelOp::copy_columns);
  Inputs in;
  struct Case {
    int64_t rows, cols, ld_src, c0, ld_dst, d0;  // dst + d0 <- src + c0
    const char* what;
  };
  const int64_t H = 3, KV = 1, hs = 5, W = (H + 2 * KV) * hs, C = H * hs, Wk = 2 * KV * hs, N = 2 * 13;
  const Case cases[] = {{N, Wk, W, C, Wk, 0, "pack k,v of qkv"},
                        {N, Wk, Wk, 0, W, C, "unpack dkv into dqkv"},
                        {37, 11, 29, 5, 17, 3, "strided"},
                        {0, 4, 9, 1, 6, 0, "no rows"},
                        {5, 0, 9, 1, 6, 0, "no columns"}};
  for (const Case& k : cases) {
    ASSERT_LE(k.c0 + k.cols, k.ld_src) << k.what;
    ASSERT_LE(k.d0 + k.cols, k.ld_dst) << k.what;
    const auto src = in.normal(static_cast<size_t>(k.rows * k.ld_src));
    const auto dst0 = in.normal(static_cast<size_t>(k.rows * k.ld_dst));
    std::vector<float> want(dst0.begin(), dst0.end());
    for (int64_t r = 0; r < k.rows; ++r) {
      for (int64_t c = 0; c < k.cols; ++c) {
        want[static_cast<size_t>(r * k.ld_dst + k.d0 + c)] = static_cast<float>(src[static_cast<size_t>(r * k.ld_src + k.c0 + c)]);
      }
    }
    F32 s_dev(be(), src), d_dev(be(), dst0);
    be().copy_columns(d_dev.p + k.d0, k.ld_dst, s_dev.p + k.c0, k.ld_src, k.rows, k.cols);
    const auto got = d_dev.host();
    for (size_t i = 0; i < want.size(); ++i) {
      ASSERT_EQ(std::bit_cast<uint32_t>(got[i]), std::bit_cast<uint32_t>(want[i])) << k.what << ", element " << i;
    }
  }
}

// Ring attention's block ops (context parallelism, ring_split.h): shapes
// {B, T, H, KV, hs} from kAttentionShapes and these, each run for every cp
// in {1, 2, 4} with T divisible by 2 cp: grouped heads everywhere; T = 16
// (chunks of 2 at cp = 4); T = 136 (chunks of 17 at cp = 4; at cp = 1 a
// rank's 136 keys span three key tiles of 64).
constexpr std::array<std::array<int64_t, 5>, 2> kRingExtraShapes = {{{2, 16, 4, 2, 5}, {1, 136, 4, 2, 19}}};

std::vector<std::pair<testing::RingShape, int64_t>> ring_cases() {
  std::vector<std::pair<testing::RingShape, int64_t>> cases;
  std::vector<std::array<int64_t, 5>> shapes(kAttentionShapes.begin(), kAttentionShapes.end());
  shapes.insert(shapes.end(), kRingExtraShapes.begin(), kRingExtraShapes.end());
  for (const auto& [B, T, H, KV, hs] : shapes) {
    for (int64_t cp : {1, 2, 4}) {
      if (T % (2 * cp) == 0) cases.push_back({testing::RingShape{B, T, H, KV, hs}, cp});
    }
  }
  return cases;
}

// Full causal attention of the whole sequence in fp64: out, lse, dqkv.
testing::RingResult full_attention_fp64(const std::vector<double>& qkv, const std::vector<double>& dout,
                                        const testing::RingShape& s) {
  testing::RingResult ref{std::vector<double>(dout.size()), std::vector<double>(static_cast<size_t>(s.B * s.H * s.T)),
                          std::vector<double>(qkv.size())};
  cpu::flash_attention_forward<double>(ref.out.data(), ref.lse.data(), qkv.data(), s.B, s.T, s.H, s.KV, s.hs);
  cpu::flash_attention_backward<double>(ref.dqkv.data(), dout.data(), qkv.data(), ref.out.data(), ref.lse.data(), s.B,
                                        s.T, s.H, s.KV, s.hs);
  return ref;
}

// The fp64 block kernels over the ring equal full attention up to rounding
// (the blocks and merges reorder the same sums: 1e-12 relative for out and
// lse, 1e-11 for the gradients, as for the fp64 flash kernels), and the
// ring's gradient passes its own finite-difference check (cp = 2 and 4 on
// T = 8: chunks of 2 and 1 tokens).
TEST(ConformanceFp64, FlashAttentionBlocksOverARingMatchTheReferenceAndFiniteDifferences) {
  Inputs in;
  for (const auto& [s, cp] : ring_cases()) {
    auto qkv = in.normal(static_cast<size_t>(s.B * s.T * s.width())), R = in.normal(static_cast<size_t>(s.B * s.T * s.H * s.hs));
    const auto ref = full_attention_fp64(qkv, R, s);
    const auto ring = testing::ring_attention_fp64(qkv, R, s, cp);
    SCOPED_TRACE("T " + std::to_string(s.T) + ", cp " + std::to_string(cp));
    expect_near_rel(ring.out, ref.out, 1e-12, "ring out fp64");
    expect_near_rel(ring.lse, ref.lse, 1e-12, "ring lse fp64");
    expect_near_rel(ring.dqkv, ref.dqkv, 1e-11, "ring dqkv fp64");
  }
  for (int64_t cp : {2, 4}) {
    const testing::RingShape s{1, 8, 2, 1, 3};
    auto qkv = in.normal(static_cast<size_t>(s.B * s.T * s.width())), R = in.normal(static_cast<size_t>(s.B * s.T * s.H * s.hs));
    auto loss = [&] { return dot(testing::ring_attention_fp64(qkv, R, s, cp).out, R); };
    const auto g = testing::ring_attention_fp64(qkv, R, s, cp).dqkv;
    fd_check(qkv, loss, g, cp == 2 ? "ring dqkv, cp 2" : "ring dqkv, cp 4");
  }
}

// The ring on the backend under test, rank by rank in its memory (fp32):
// each rank runs block_forward over the K/V blocks in ring order (its own
// first, accumulate = false; then true), then block_backward over the same
// blocks, adding into its dq and into the dkv of the block's owner. Each
// rank's dq buffer holds a sentinel in its k,v part, which must come back
// untouched. Returns the global out, lse and dqkv.
testing::RingResult ring_attention_on(const Backend& be, const std::vector<double>& qkv, const std::vector<double>& dout,
                                      const testing::RingShape& s, int64_t cp) {
  const testing::RingSplit sp{cp, s.T / (2 * cp)};
  const int64_t W = s.width(), C = s.H * s.hs, Wk = 2 * s.KV * s.hs, L = sp.local();
  constexpr double kSentinel = 7.25;
  std::vector<std::unique_ptr<F32>> q, kv, dy, out, lse, dq, dkv;
  std::vector<std::unique_ptr<I32>> pos;
  for (int64_t r = 0; r < cp; ++r) {
    q.push_back(std::make_unique<F32>(be, testing::ring_gather(qkv, sp, r, s.B, s.T, W, 0, W)));
    kv.push_back(std::make_unique<F32>(be, testing::ring_gather(qkv, sp, r, s.B, s.T, W, C, Wk)));
    dy.push_back(std::make_unique<F32>(be, testing::ring_gather(dout, sp, r, s.B, s.T, C, 0, C)));
    out.push_back(std::make_unique<F32>(be, static_cast<size_t>(s.B * L * C)));
    lse.push_back(std::make_unique<F32>(be, static_cast<size_t>(s.B * s.H * L)));
    std::vector<double> dq0(static_cast<size_t>(s.B * L * W), 0.0);
    for (size_t i = 0; i < dq0.size(); ++i) dq0[i] = static_cast<int64_t>(i) % W >= C ? kSentinel : 0.0;
    dq.push_back(std::make_unique<F32>(be, dq0));
    dkv.push_back(std::make_unique<F32>(be, static_cast<size_t>(s.B * L * Wk)));
    pos.push_back(std::make_unique<I32>(be, sp.positions(r)));
  }
  for (int64_t r = 0; r < cp; ++r) {
    for (int64_t i = 0; i < cp; ++i) {
      const int64_t o = sp.source(r, i);
      be.flash_attention_block_forward(out[r]->p, lse[r]->p, q[r]->p, kv[o]->p, pos[r]->p, pos[o]->p, s.B, L, L, s.H,
                                       s.KV, s.hs, i > 0);
    }
  }
  for (int64_t r = 0; r < cp; ++r) {
    for (int64_t i = 0; i < cp; ++i) {
      const int64_t o = sp.source(r, i);
      be.flash_attention_block_backward(dq[r]->p, dkv[o]->p, dy[r]->p, q[r]->p, kv[o]->p, out[r]->p, lse[r]->p,
                                        pos[r]->p, pos[o]->p, s.B, L, L, s.H, s.KV, s.hs);
    }
  }
  testing::RingResult res{std::vector<double>(dout.size()), std::vector<double>(static_cast<size_t>(s.B * s.H * s.T)),
                          std::vector<double>(qkv.size())};
  for (int64_t r = 0; r < cp; ++r) {
    const auto dqh = dq[r]->host();
    for (size_t i = 0; i < dqh.size(); ++i) {
      if (static_cast<int64_t>(i) % W >= C) {
        EXPECT_EQ(dqh[i], static_cast<float>(kSentinel)) << "dq's k,v part was written, " << i;
      }
    }
    testing::ring_scatter(res.out, out[r]->host(), sp, r, s.B, s.T, C, 0, C);
    testing::ring_scatter_lse(res.lse, lse[r]->host(), sp, r, s.B, s.H, s.T);
    testing::ring_scatter(res.dqkv, testing::ring_columns(dqh, s.B * L, W, 0, C), sp, r, s.B, s.T, W, 0, C);
    testing::ring_scatter(res.dqkv, dkv[r]->host(), sp, r, s.B, s.T, W, C, Wk);
  }
  return res;
}

std::vector<float> to_floats(const std::vector<double>& v) { return std::vector<float>(v.begin(), v.end()); }

// The backend's ring, put back together, against full causal attention in
// fp64, within the fp32 flash bounds of
// FlashAttentionMatchesTheReferenceAndFiniteDifferences with one more
// rescaling rounding per key tile of every block and per merge: a query
// meets cp blocks of 2 Tc keys, ceil(2 Tc / 64) tiles each, and cp - 1 merges.
TEST_P(Conformance, FlashAttentionBlocksOverARingMatchFullAttention) {
  NEED_OPS(KernelOp::flash_attention_block_forward, KernelOp::flash_attention_block_backward);
  Inputs in;
  for (const auto& [s, cp] : ring_cases()) {
    auto qkv = in.normal(static_cast<size_t>(s.B * s.T * s.width())), R = in.normal(static_cast<size_t>(s.B * s.T * s.H * s.hs));
    const auto ref = full_attention_fp64(qkv, R, s);
    const auto ring = ring_attention_on(be(), qkv, R, s, cp);
    SCOPED_TRACE("T " + std::to_string(s.T) + ", cp " + std::to_string(cp));
    const int64_t L = s.T / cp;
    const double tiles = static_cast<double>(cp * ((L + 63) / 64) + cp);
    const double t = (s.hs + s.T + tiles + 8) * kEps32 * s.hs * 16.0;
    expect_within(to_floats(ring.out), ref.out, uniform_tol(ref.out.size(), 4 * t), "ring out fp32");
    expect_within(to_floats(ring.lse), ref.lse,
                  uniform_tol(ref.lse.size(), t + 8 * kEps32 * (s.hs * 16 + std::log(s.T))), "ring lse fp32");
    expect_within(to_floats(ring.dqkv), ref.dqkv, uniform_tol(ref.dqkv.size(), s.T * 16 * t), "ring dqkv fp32");
    double wy = 0, wd = 0;
    for (size_t i = 0; i < ref.out.size(); ++i) wy = std::max(wy, std::abs(ring.out[i] - ref.out[i]) / (4 * t));
    for (size_t i = 0; i < ref.dqkv.size(); ++i) wd = std::max(wd, std::abs(ring.dqkv[i] - ref.dqkv[i]) / (s.T * 16 * t));
    std::printf("ring T %lld cp %lld: worst error / bound: out %.2e, dqkv %.2e\n", static_cast<long long>(s.T),
                static_cast<long long>(cp), wy, wd);
  }
}

// Rows that see no key of a block (the load-balanced split at cp = 2, T = 8:
// rank 0 holds chunks 0 and 3, positions 0 1 6 7; rank 1 chunks 1 and 2,
// positions 2 3 4 5): chunk 0's queries against chunk 3's keys see nothing,
// so accumulate = false gives lse = -inf, out = 0, accumulate = true leaves
// (out, lse) as they were, bit for bit, and the backward adds nothing. Rank
// 0's queries against rank 1's block: chunk 0's rows see nothing and chunk
// 3's see every key; merging rank 0's own block on top then fills every row.
// The fp64 kernels on the same steps are the reference (bounds as above);
// nothing may be NaN.
TEST_P(Conformance, FlashAttentionBlockRowsThatSeeNoKey) {
  NEED_OPS(KernelOp::flash_attention_block_forward, KernelOp::flash_attention_block_backward);
  Inputs in;
  const int64_t B = 2, H = 4, KV = 2, hs = 3, T = 8, W = (H + 2 * KV) * hs, Wk = 2 * KV * hs, C = H * hs;
  const testing::RingSplit sp{2, 2};
  const auto p0 = sp.positions(0), p1 = sp.positions(1);
  const std::vector<int32_t> chunk0(p0.begin(), p0.begin() + 2), chunk3(p0.begin() + 2, p0.end());
  {  // chunk 0's 2 queries, chunk 3's 2 keys
    const auto q = in.normal(B * 2 * W), kv = in.normal(B * 2 * Wk), y0 = in.normal(B * 2 * C), dy = in.normal(B * 2 * C);
    auto l0 = in.normal(B * H * 2);
    l0[1] = -INFINITY;
    F32 qf(be(), q), kvf(be(), kv), yf(be(), y0), lf(be(), l0), dyf(be(), dy), dqf(be(), q), dkvf(be(), kv);
    I32 pq(be(), chunk0), pk(be(), chunk3);
    be().flash_attention_block_forward(yf.p, lf.p, qf.p, kvf.p, pq.p, pk.p, B, 2, 2, H, KV, hs, true);
    EXPECT_EQ(yf.host(), to_floats(y0)) << "accumulate = true changed out";
    EXPECT_EQ(lf.host(), to_floats(l0)) << "accumulate = true changed lse";
    be().flash_attention_block_backward(dqf.p, dkvf.p, dyf.p, qf.p, kvf.p, yf.p, lf.p, pq.p, pk.p, B, 2, 2, H, KV, hs);
    EXPECT_EQ(dqf.host(), to_floats(q)) << "the backward of an unseen block changed dq";
    EXPECT_EQ(dkvf.host(), to_floats(kv)) << "the backward of an unseen block changed dkv";
    be().flash_attention_block_forward(yf.p, lf.p, qf.p, kvf.p, pq.p, pk.p, B, 2, 2, H, KV, hs, false);
    for (float v : yf.host()) ASSERT_EQ(v, 0.0f) << "out of a row that sees no key";
    for (float v : lf.host()) ASSERT_EQ(v, -INFINITY) << "lse of a row that sees no key";
  }
  // Rank 0's 4 queries against rank 1's block, then its own.
  const auto q = in.normal(B * T / 2 * W), kv1 = in.normal(B * T / 2 * Wk), kv0 = testing::ring_columns(q, B * T / 2, W, C, Wk);
  std::vector<double> y(B * T / 2 * C), l(B * H * T / 2);
  F32 qf(be(), q), k1(be(), kv1), k0(be(), kv0), yf(be(), y.size()), lf(be(), l.size());
  I32 pq(be(), p0), pk(be(), p1);
  const double t = (hs + T + 4 + 8) * kEps32 * hs * 16.0;
  for (int step = 0; step < 2; ++step) {
    const auto& kvs = step == 0 ? kv1 : kv0;
    cpu::flash_attention_block_forward<double>(y.data(), l.data(), q.data(), kvs.data(), p0.data(),
                                               (step == 0 ? p1 : p0).data(), B, 4, 4, H, KV, hs, step > 0);
    be().flash_attention_block_forward(yf.p, lf.p, qf.p, (step == 0 ? k1 : k0).p, pq.p, (step == 0 ? pk : pq).p, B, 4, 4,
                                       H, KV, hs, step > 0);
    const auto yh = yf.host(), lh = lf.host();
    for (size_t i = 0; i < l.size(); ++i) {
      const bool unseen = step == 0 && i % 4 < 2;  // chunk 0's rows against rank 1's block
      ASSERT_EQ(std::isinf(l[i]) && l[i] < 0, unseen) << "fp64 lse " << i << ", step " << step;
      if (unseen) {
        ASSERT_EQ(lh[i], -INFINITY) << "lse " << i;
      } else {
        ASSERT_NEAR(lh[i], l[i], t + 8 * kEps32 * (hs * 16 + std::log(T))) << "lse " << i << ", step " << step;
      }
    }
    for (size_t i = 0; i < y.size(); ++i) {
      ASSERT_FALSE(std::isnan(yh[i])) << "out " << i;
      ASSERT_NEAR(yh[i], y[i], 4 * t) << "out " << i << ", step " << step;
    }
  }
}

// The tile paths of the block kernels (cpu: 64 x 64 tiles, each pair of a
// query tile and a key tile seen by no query, seen whole by every query, or
// masked key by key): Tq = 150 queries (tiles of 64, 64, 22) at positions
// t + 100, but rows 0 and 1 at -1, which see no key of any block; H = 4
// over KV = 2; hs = 19. Three blocks merged in turn, each against the fp64
// scalar kernels on the same steps:
//   C, accumulate off (out holding noise): 77 keys at shuffled positions in
//     [120, 320): every pair masked, the keys unordered; rows at positions
//     below 120 see nothing (lse = -inf, out = 0);
//   A, accumulate on: 133 keys at s + 140 (tiles 140.., 204.., 268..): every
//     kind of pair (query tile 2 sees key tile 0 whole, key tile 2 not at
//     all); rows still at -inf that meet a key take it alone;
//   B, accumulate on: 69 keys at s, below every query but rows 0 and 1: key
//     tiles seen whole by query tiles 1 and 2, masked for tile 0.
// Then the backward of each block, adding into noise in dq and dkv, twice:
// bit for bit the same (deterministic), dq's k,v part untouched. Bounds as
// FlashAttentionBlocksOverARingMatchFullAttention's, with the keys of all
// three blocks and their tiles and merges.
TEST_P(Conformance, FlashAttentionBlockTilePaths) {
  NEED_OPS(KernelOp::flash_attention_block_forward, KernelOp::flash_attention_block_backward);
  Inputs in;
  const int64_t B = 2, H = 4, KV = 2, hs = 19, Tq = 150, W = (H + 2 * KV) * hs, Wk = 2 * KV * hs, C = H * hs;
  std::vector<int32_t> pq(Tq);
  for (int64_t t = 0; t < Tq; ++t) pq[t] = t < 2 ? -1 : static_cast<int32_t>(t + 100);
  struct Block {
    std::vector<int32_t> pos;
    bool accumulate;
  };
  std::vector<Block> blocks(3);
  std::mt19937_64 gen(77);
  std::vector<int32_t> shuffled(200);
  for (int32_t i = 0; i < 200; ++i) shuffled[i] = 120 + i;
  std::shuffle(shuffled.begin(), shuffled.end(), gen);
  blocks[0] = {std::vector<int32_t>(shuffled.begin(), shuffled.begin() + 77), false};
  blocks[1] = {std::vector<int32_t>(133), true};
  blocks[2] = {std::vector<int32_t>(69), true};
  for (int32_t s = 0; s < 133; ++s) blocks[1].pos[s] = s + 140;
  for (int32_t s = 0; s < 69; ++s) blocks[2].pos[s] = s;
  int64_t keys = 0, tiles = 0;
  for (const Block& k : blocks) {
    keys += static_cast<int64_t>(k.pos.size());
    tiles += (static_cast<int64_t>(k.pos.size()) + 63) / 64 + 1;
  }
  const double t = (hs + keys + tiles + 8) * kEps32 * hs * 16.0;
  const double t_lse = t + 8 * kEps32 * (hs * 16 + std::log(keys)), t_grad = keys * 16 * t;

  const auto q = in.normal(B * Tq * W), dy = in.normal(B * Tq * C);
  std::vector<std::vector<double>> kv;
  for (const Block& k : blocks) kv.push_back(in.normal(B * k.pos.size() * Wk));
  std::vector<double> y = in.normal(B * Tq * C), l(B * H * Tq);  // out starts as noise
  F32 qf(be(), q), yf(be(), y), lf(be(), l.size()), dyf(be(), dy);
  I32 pqf(be(), pq);
  std::vector<std::unique_ptr<F32>> kvf;
  std::vector<std::unique_ptr<I32>> pkf;
  for (size_t i = 0; i < blocks.size(); ++i) {
    kvf.push_back(std::make_unique<F32>(be(), kv[i]));
    pkf.push_back(std::make_unique<I32>(be(), blocks[i].pos));
  }
  for (size_t i = 0; i < blocks.size(); ++i) {
    SCOPED_TRACE("forward, block " + std::to_string(i));
    const auto Tk = static_cast<int64_t>(blocks[i].pos.size());
    cpu::flash_attention_block_forward<double>(y.data(), l.data(), q.data(), kv[i].data(), pq.data(),
                                               blocks[i].pos.data(), B, Tq, Tk, H, KV, hs, blocks[i].accumulate);
    be().flash_attention_block_forward(yf.p, lf.p, qf.p, kvf[i]->p, pqf.p, pkf[i]->p, B, Tq, Tk, H, KV, hs,
                                       blocks[i].accumulate);
    const auto yh = yf.host(), lh = lf.host();
    int64_t unseen = 0;
    for (size_t j = 0; j < l.size(); ++j) {
      if (l[j] == -INFINITY) {
        ++unseen;
        ASSERT_EQ(lh[j], -INFINITY) << "lse " << j;
      } else {
        ASSERT_NEAR(lh[j], l[j], t_lse) << "lse " << j;
      }
    }
    EXPECT_GE(unseen, B * H * 2) << "rows 0 and 1 see no key";
    for (size_t j = 0; j < y.size(); ++j) {
      ASSERT_FALSE(std::isnan(yh[j])) << "out " << j;
      ASSERT_NEAR(yh[j], y[j], 4 * t) << "out " << j;
    }
  }
  // The backward of every block, into noise; dq's k,v part a sentinel.
  constexpr double kSentinel = 7.25;
  auto dq0 = in.normal(B * Tq * W);
  for (size_t i = 0; i < dq0.size(); ++i) {
    if (static_cast<int64_t>(i) % W >= C) dq0[i] = kSentinel;
  }
  std::vector<std::vector<double>> dkv0;
  for (const auto& k : kv) dkv0.push_back(in.normal(k.size()));
  auto dq = dq0;
  auto dkv = dkv0;
  for (size_t i = 0; i < blocks.size(); ++i) {
    cpu::flash_attention_block_backward<double>(dq.data(), dkv[i].data(), dy.data(), q.data(), kv[i].data(), y.data(),
                                                l.data(), pq.data(), blocks[i].pos.data(), B, Tq,
                                                static_cast<int64_t>(blocks[i].pos.size()), H, KV, hs);
  }
  std::vector<std::vector<float>> first;
  for (int run = 0; run < 2; ++run) {
    SCOPED_TRACE("backward, run " + std::to_string(run));
    F32 dqf(be(), dq0);
    std::vector<std::unique_ptr<F32>> dkvf;
    for (size_t i = 0; i < blocks.size(); ++i) {
      dkvf.push_back(std::make_unique<F32>(be(), dkv0[i]));
      be().flash_attention_block_backward(dqf.p, dkvf[i]->p, dyf.p, qf.p, kvf[i]->p, yf.p, lf.p, pqf.p, pkf[i]->p, B,
                                          Tq, static_cast<int64_t>(blocks[i].pos.size()), H, KV, hs);
    }
    std::vector<std::vector<float>> got = {dqf.host()};
    for (const auto& d : dkvf) got.push_back(d->host());
    for (size_t i = 0; i < got[0].size(); ++i) {
      if (static_cast<int64_t>(i) % W >= C) {
        ASSERT_EQ(got[0][i], static_cast<float>(kSentinel)) << "dq's k,v part, " << i;
      }
    }
    expect_within(got[0], dq, uniform_tol(dq.size(), t_grad), "block dq fp32");
    for (size_t i = 0; i < blocks.size(); ++i) {
      expect_within(got[i + 1], dkv[i], uniform_tol(dkv[i].size(), t_grad), ("block dkv fp32, block " + std::to_string(i)).c_str());
    }
    if (run == 0) {
      first = got;
    } else {
      for (size_t i = 0; i < got.size(); ++i) {
        for (size_t j = 0; j < got[i].size(); ++j) {
          ASSERT_EQ(std::bit_cast<uint32_t>(got[i][j]), std::bit_cast<uint32_t>(first[i][j])) << "rerun differs, buffer " << i << ", " << j;
        }
      }
    }
  }
}

TEST_P(Conformance, CrossEntropyWithPaddingAndIgnore) {
  NEED_OPS(KernelOp::cross_entropy);
  Inputs in;
  const int64_t N = 6, V = 23, Vp = 32;
  auto logits = in.normal(N * Vp, 3.0);
  std::vector<int32_t> targets = {0, 22, 5, -1, 7, 22};
  const double dloss = 0.37;
  auto loss = [&] {
    std::vector<double> l = logits, losses(N);
    cpu::cross_entropy<double>(losses.data(), l.data(), targets.data(), N, V, Vp, dloss);
    double s = 0;
    for (double v : losses) s += v;
    return dloss * s;
  };
  std::vector<double> g = logits, losses(N);
  cpu::cross_entropy<double>(losses.data(), g.data(), targets.data(), N, V, Vp, dloss);
  fd_check(logits, loss, g, "cross-entropy dlogits");
  for (int64_t n = 0; n < N; ++n) {
    for (int64_t j = V; j < Vp; ++j) ASSERT_EQ(g[n * Vp + j], 0.0) << "padded column has a gradient";
    if (targets[n] < 0) {
      ASSERT_EQ(losses[n], 0.0);
    }
    // Closed form: loss = logsumexp over the real columns minus the target logit.
    if (targets[n] >= 0) {
      double m = -1e300, z = 0;
      for (int64_t j = 0; j < V; ++j) m = std::max(m, logits[n * Vp + j]);
      for (int64_t j = 0; j < V; ++j) z += std::exp(logits[n * Vp + j] - m);
      ASSERT_NEAR(losses[n], std::log(z) + m - logits[n * Vp + targets[n]], 1e-12);
    }
  }
  F32 lf(be(), logits), lossf(be(), N);
  I32 targets_dev(be(), targets);
  be().cross_entropy(lossf.p, lf.p, targets_dev.p, N, V, Vp, static_cast<float>(dloss));
  // loss = log Z + m - l_y: |l| <= 15, relative error of exp ~2 ulp, Z sums V terms.
  expect_within(lossf.host(), losses, uniform_tol(N, (V + 16) * kEps32 * 16), "cross-entropy loss fp32");
  expect_within(lf.host(), g, uniform_tol(g.size(), (V + 16) * kEps32 * dloss), "cross-entropy grad fp32");
}

TEST_P(Conformance, VocabParallelEmbeddingAndPositions) {
  NEED_OPS(KernelOp::embedding_lookup, KernelOp::embedding_lookup_backward, KernelOp::position_add_backward);
  Inputs in;
  const int64_t N = 10, T = 4, C = 19, V = 7, n0 = 3;
  std::vector<int32_t> tok = {3, 1, 3, 6, 0, 3, 3, 2, 1, 6};
  auto wte = in.normal(V * C), wpe = in.normal(T * C), R = in.normal(N * C);
  // The whole vocabulary, then shards [0, 4) and [4, 7) summed: the same embedding.
  auto loss = [&] {
    std::vector<double> y(N * C);
    cpu::embedding_lookup<double>(y.data(), tok.data(), wte.data(), 0, V, N, C);
    cpu::position_add<double>(y.data(), wpe.data(), n0, N, T, C);
    return dot(y, R);
  };
  std::vector<double> full(N * C), a(N * C), b(N * C);
  cpu::embedding_lookup<double>(full.data(), tok.data(), wte.data(), 0, V, N, C);
  cpu::embedding_lookup<double>(a.data(), tok.data(), wte.data(), 0, 4, N, C);
  cpu::embedding_lookup<double>(b.data(), tok.data(), wte.data() + 4 * C, 4, V, N, C);
  for (int64_t i = 0; i < N * C; ++i) ASSERT_EQ(a[i] + b[i], full[i]);
  for (int64_t c = 0; c < C; ++c) ASSERT_EQ(full[2 * C + c], wte[3 * C + c]);  // token 3
  std::vector<double> dwte(V * C, 0.0), dwpe(T * C, 0.0);
  cpu::embedding_lookup_backward<double>(dwte.data(), R.data(), tok.data(), 0, 4, N, C);
  cpu::embedding_lookup_backward<double>(dwte.data() + 4 * C, R.data(), tok.data(), 4, V, N, C);
  cpu::position_add_backward<double>(dwpe.data(), R.data(), n0, N, T, C);
  fd_check(wte, loss, dwte, "embedding dwte (two shards)");
  fd_check(wpe, loss, dwpe, "position dwpe");
  F32 wf(be(), wte), Rf(be(), R), dwf(be(), V * C), dpf(be(), T * C), yf(be(), N * C);
  I32 tok_dev(be(), tok);
  be().embedding_lookup(yf.p, tok_dev.p, wf.p, 0, V, N, C);
  expect_within(yf.host(), full, uniform_tol(full.size(), 0.0), "embedding lookup fp32 (a copy: exact)");
  be().embedding_lookup_backward(dwf.p, Rf.p, tok_dev.p, 0, V, N, C);
  be().position_add_backward(dpf.p, Rf.p, n0, N, T, C);
  // Token 3 appears 4 times, each position 2-3 times: short sums of |terms| <= 4.
  expect_within(dwf.host(), dwte, uniform_tol(dwte.size(), 8 * kEps32 * 16), "embedding dwte fp32");
  expect_within(dpf.host(), dwpe, uniform_tol(dwpe.size(), 4 * kEps32 * 12), "position dwpe fp32");
}

TEST_P(Conformance, CrossEntropyPhasesOverVocabShards) {
  // Two shards of a 23-entry vocabulary (columns [0,12) and [12,23), each
  // padded to 16), reduced by hand as the tensor-parallel group would, give
  // the single-rank losses and gradients exactly.
  Inputs in;
  const int64_t N = 5, V = 23, ld = 16;
  auto full = in.normal(N * 32, 3.0);
  std::vector<int32_t> targets = {0, 22, 12, -1, 11};
  std::vector<double> ref = full, ref_loss(N);
  cpu::cross_entropy<double>(ref_loss.data(), ref.data(), targets.data(), N, V, 32, 0.5);
  std::vector<double> s0(N * ld, 0.0), s1(N * ld, 0.0);
  for (int64_t n = 0; n < N; ++n) {
    for (int64_t j = 0; j < 12; ++j) s0[n * ld + j] = full[n * 32 + j];
    for (int64_t j = 0; j < 11; ++j) s1[n * ld + j] = full[n * 32 + 12 + j];
  }
  std::vector<double> m0(N), m1(N), z0(N), z1(N), y0(N), y1(N), loss(N);
  cpu::ce_max<double>(m0.data(), s0.data(), N, 12, ld);
  cpu::ce_max<double>(m1.data(), s1.data(), N, 11, ld);
  for (int64_t n = 0; n < N; ++n) m0[n] = m1[n] = std::max(m0[n], m1[n]);  // all-reduce max
  cpu::ce_exp_sum<double>(z0.data(), y0.data(), s0.data(), targets.data(), m0.data(), N, 12, ld, 0);
  cpu::ce_exp_sum<double>(z1.data(), y1.data(), s1.data(), targets.data(), m1.data(), N, 11, ld, 12);
  for (int64_t n = 0; n < N; ++n) {  // all-reduce sum
    z0[n] = z1[n] = z0[n] + z1[n];
    y0[n] = y1[n] = y0[n] + y1[n];
  }
  cpu::ce_finalize<double>(loss.data(), s0.data(), targets.data(), m0.data(), z0.data(), y0.data(), N, 12, ld, 0, 0.5);
  cpu::ce_finalize<double>(loss.data(), s1.data(), targets.data(), m1.data(), z1.data(), y1.data(), N, 11, ld, 12, 0.5);
  for (int64_t n = 0; n < N; ++n) {
    ASSERT_NEAR(loss[n], ref_loss[n], 1e-12);
    for (int64_t j = 0; j < 12; ++j) ASSERT_NEAR(s0[n * ld + j], ref[n * 32 + j], 1e-14);
    for (int64_t j = 0; j < 11; ++j) ASSERT_NEAR(s1[n * ld + j], ref[n * 32 + 12 + j], 1e-14);
    for (int64_t j = 12; j < ld; ++j) ASSERT_EQ(s0[n * ld + j], 0.0);
    for (int64_t j = 11; j < ld; ++j) ASSERT_EQ(s1[n * ld + j], 0.0);
  }
}

TEST_P(Conformance, BiasResidual) {
  NEED_OPS(KernelOp::bias_residual);
  Inputs in;
  const int64_t N = 3, C = 21;
  auto a = in.normal(N * C), b = in.normal(C), r = in.normal(N * C);
  F32 af(be(), a), bf(be(), b), rf(be(), r), out(be(), N * C);
  be().bias_residual(out.p, af.p, bf.p, rf.p, N, C);
  const std::vector<float> o = out.host();
  for (int64_t n = 0; n < N; ++n)
    for (int64_t c = 0; c < C; ++c) {
      const float want = (static_cast<float>(a[n * C + c]) + static_cast<float>(b[c])) + static_cast<float>(r[n * C + c]);
      ASSERT_EQ(o[n * C + c], want);
    }
  be().bias_residual(af.p, af.p, nullptr, rf.p, N, C);  // in place, no bias
  const std::vector<float> inplace = af.host();
  for (int64_t i = 0; i < N * C; ++i) ASSERT_EQ(inplace[i], static_cast<float>(a[i]) + static_cast<float>(r[i]));
}

TEST_P(Conformance, ResidualClosedForm) {
  NEED_OPS(KernelOp::residual_forward);
  const int64_t n = 1001;
  std::vector<double> a(n), b(n);
  for (int64_t i = 0; i < n; ++i) {
    a[i] = static_cast<double>(i);
    b[i] = 0.5;
  }
  F32 af(be(), a), bf(be(), b), of(be(), n);
  be().residual_forward(of.p, af.p, bf.p, n);
  const std::vector<float> o = of.host();
  for (int64_t i = 0; i < n; ++i) ASSERT_EQ(o[i], static_cast<float>(i) + 0.5f);
}

// The step's reductions, whose results stay in device memory: doubles read
// back by one copy.
std::vector<double> device_doubles(const Backend& be, const double* d, int64_t n) {
  std::vector<double> h(static_cast<size_t>(n));
  be.copy(h.data(), d, n * static_cast<int64_t>(sizeof(double)), CopyKind::device_to_host);
  return h;
}

TEST_P(Conformance, SumSquaresAndNonfiniteCountsBySegmentGroup) {
  NEED_OPS(KernelOp::sum_squares, KernelOp::count_nonfinite);
  // x[i] = i mod 8: every partial sum is a small integer, exact in fp32, so
  // each group's result must equal the closed form exactly: per full period
  // of 8 the squares sum to 140.
  auto closed = [](int64_t m) {
    double want = 0;
    for (int64_t r = 0; r < m % 8; ++r) want += static_cast<double>(r * r);
    return want + 140.0 * static_cast<double>(m / 8);
  };
  const int64_t m = 100003, k = 37;
  std::vector<double> x(m), y(k);
  for (int64_t i = 0; i < m; ++i) x[i] = static_cast<double>(i % 8);
  for (int64_t i = 0; i < k; ++i) y[i] = static_cast<double>(i % 8);
  F32 xf(be(), x), yf(be(), y);
  double* out = static_cast<double*>(be().alloc(4 * sizeof(double)));
  // Group 0: x and the first 20 of y; group 2: the rest of y; group 1 and 3: nothing.
  const std::vector<SegmentRef> segs = {{xf.p, m, 0}, {yf.p, 20, 0}, {yf.p + 20, k - 20, 2}};
  be().sum_squares(out, segs.data(), 3, 4);
  std::vector<double> h = device_doubles(be(), out, 4);
  EXPECT_EQ(h[0], closed(m) + closed(20));
  EXPECT_EQ(h[1], 0.0);
  EXPECT_EQ(h[2], closed(k) - closed(20));
  EXPECT_EQ(h[3], 0.0);
  EXPECT_EQ(cpu::sum_squares<double>(x.data(), m), closed(m));
  // Non-finite values: one inf in x, a nan and an inf in y's second part.
  const float inf = INFINITY, nan = NAN;
  be().copy(xf.p + 77, &inf, sizeof inf, CopyKind::host_to_device);
  be().copy(yf.p + 21, &nan, sizeof nan, CopyKind::host_to_device);
  be().copy(yf.p + 30, &inf, sizeof inf, CopyKind::host_to_device);
  be().count_nonfinite(out, segs.data(), 3, 4);
  h = device_doubles(be(), out, 4);
  EXPECT_EQ(h, (std::vector<double>{1, 0, 2, 0}));
  be().release(out);
}

TEST_P(Conformance, AccumulateSumAddsToTheDeviceScalar) {
  NEED_OPS(KernelOp::accumulate_sum);
  const int64_t n = 555;
  std::vector<double> x(n);
  double want = 2.5;  // the accumulator's start
  for (int64_t i = 0; i < n; ++i) {
    x[i] = static_cast<double>(i % 13) * 0.25;  // exact in fp32 and in the double sum
    want += x[i];
  }
  F32 xf(be(), x);
  double* acc = static_cast<double*>(be().alloc(sizeof(double)));
  be().fill(acc, DType::f64, 2.5, 1);
  be().accumulate_sum(acc, xf.p, n);
  EXPECT_EQ(device_doubles(be(), acc, 1)[0], want);
  be().release(acc);
}

TEST_P(Conformance, FillCopyAndCast) {
  NEED_OPS(KernelOp::cast);
  const int64_t n = 67;
  F32 a(be(), static_cast<size_t>(n)), b(be(), static_cast<size_t>(n));
  be().fill(a.p, DType::f32, -1.75, n);
  be().copy(b.p, a.p, n * 4, CopyKind::device_to_device);
  for (float v : b.host()) ASSERT_EQ(v, -1.75f);
  // fp32 -> bf16 rounds to nearest, ties to even (bf16 keeps 8 significant
  // bits): 1 + 2^-8 is a tie between 1 and 1 + 2^-7 and goes to 1 (even);
  // 1 + 3*2^-8 is a tie that goes up to 1 + 2^-6; 1 + 2^-8 + 2^-20 rounds up.
  const std::vector<double> vals = {1.0 + std::ldexp(1.0, -8), 1.0 + 3 * std::ldexp(1.0, -8),
                                    1.0 + std::ldexp(1.0, -8) + std::ldexp(1.0, -20), -3.140625, 65504.0, 1e-30};
  const std::vector<double> want = {1.0, 1.0 + std::ldexp(1.0, -6), 1.0 + std::ldexp(1.0, -7), -3.140625, 65536.0,
                                    0.0};
  F32 src(be(), vals), back(be(), vals.size());
  void* bf16 = be().alloc(static_cast<int64_t>(vals.size() * 2));
  
  be().cast(bf16, DType::bf16, src.p, DType::f32, static_cast<int64_t>(vals.size()));
  be().cast(back.p, DType::f32, bf16, DType::bf16, static_cast<int64_t>(vals.size()));
  const std::vector<float> got = back.host();
  for (size_t i = 0; i < vals.size() - 1; ++i) EXPECT_EQ(got[i], static_cast<float>(want[i])) << vals[i];
  // 1e-30 is within bf16's normal range (8 exponent bits, as fp32): relative error <= 2^-9.
  EXPECT_NEAR(got.back(), 1e-30, 1e-30 * std::ldexp(1.0, -9));
  be().release(bf16);
}

TEST_P(Conformance, AdamWFirstStepClosedFormOverSegments) {
  NEED_OPS(KernelOp::adamw);
  // At step 1 with m = v = 0: m_hat = g, v_hat = g^2, so
  //   p1 = p0 (1 - lr wd) - lr g / (|g| + eps)   (g = grad * grad_scale).
  // Two segments in one call, the second without weight decay.
  const int64_t n = 37, split = 20;
  std::vector<double> p(n), g(n), zeros(n, 0.0);
  for (int64_t i = 0; i < n; ++i) {
    p[i] = static_cast<double>(0.1f * static_cast<float>(i) - 1.0f);
    g[i] = static_cast<double>((i % 3 == 0 ? -1.0f : 1.0f) * (0.01f + 0.03f * static_cast<float>(i)));
  }
  F32 pf(be(), p), gf(be(), g), mf(be(), zeros), vf(be(), zeros);
  const std::vector<AdamWSegment> segs = {{pf.p, gf.p, mf.p, vf.p, split, 0.1f},
                                          {pf.p + split, gf.p + split, mf.p + split, vf.p + split, n - split, 0.0f}};
  AdamWArgs a{.lr = 0.01f, .beta1 = 0.9f, .beta2 = 0.95f, .eps = 1e-8f, .grad_scale = 0.5f, .step = 1};
  // The dry run writes nothing and counts nothing non-finite here.
  double* bad = static_cast<double*>(be().alloc(sizeof(double)));
  be().adamw(segs.data(), 2, a, bad);
  EXPECT_EQ(device_doubles(be(), bad, 1)[0], 0.0);
  for (size_t i = 0; i < p.size(); ++i) ASSERT_EQ(pf.host()[i], static_cast<float>(p[i]));
  be().adamw(segs.data(), 2, a, nullptr);
  const std::vector<float> p1 = pf.host(), m1 = mf.host(), v1 = vf.host();
  for (int64_t i = 0; i < n; ++i) {
    const double gi = 0.5 * static_cast<float>(g[i]), wd = i < split ? 0.1 : 0.0;
    const double want = p[i] * (1 - 0.01 * wd) - 0.01 * gi / (std::abs(gi) + 1e-8);
    ASSERT_NEAR(p1[i], want, 8 * kEps32 * (std::abs(p[i]) + 0.01)) << i;
    ASSERT_NEAR(m1[i], 0.1 * gi, 4 * kEps32 * std::abs(gi));
    ASSERT_NEAR(v1[i], 0.05 * gi * gi, 4 * kEps32 * gi * gi);
  }
  // A second step in fp32 and fp64 agree (same arithmetic, rounding only).
  std::vector<double> pd(p1.begin(), p1.end()), gd(n), md(m1.begin(), m1.end()), vd(v1.begin(), v1.end());
  for (int64_t i = 0; i < n; ++i) gd[i] = static_cast<float>(g[i]);
  a.step = 2;
  be().adamw(segs.data(), 2, a, nullptr);
  cpu::adamw<double>(pd.data(), gd.data(), md.data(), vd.data(), split, a, 0.1f);
  cpu::adamw<double>(pd.data() + split, gd.data() + split, md.data() + split, vd.data() + split, n - split, a, 0.0f);
  const std::vector<float> p2 = pf.host();
  for (int64_t i = 0; i < n; ++i) ASSERT_NEAR(p2[i], pd[i], 16 * kEps32 * (std::abs(pd[i]) + 0.01));
  // An enormous learning rate overflows p: the dry run counts every element
  // of the decayed segment (|p (1 - lr wd)| > FLT_MAX) and writes nothing.
  a.lr = 1e38f;
  a.step = 3;
  be().adamw(segs.data(), 2, a, bad);
  EXPECT_EQ(device_doubles(be(), bad, 1)[0], static_cast<double>(n));
  const std::vector<float> p3 = pf.host();
  for (int64_t i = 0; i < n; ++i) ASSERT_EQ(p3[i], p2[i]);
  // With a bf16 copy requested, the update writes each new parameter rounded
  // to bf16 (nearest even) there, bit for bit what cast makes of it, and
  // leaves the fp32 update as it was. The dry run writes no copy.
  auto* copy = static_cast<uint16_t*>(be().alloc(n * static_cast<int64_t>(sizeof(uint16_t))));
  be().fill(copy, DType::bf16, 0.0, n);
  std::vector<AdamWSegment> with_copy = segs;
  with_copy[0].param_bf16 = copy;
  with_copy[1].param_bf16 = copy + split;
  be().adamw(with_copy.data(), 2, a, bad);
  std::vector<uint16_t> got(static_cast<size_t>(n)), want(static_cast<size_t>(n));
  be().copy(got.data(), copy, n * static_cast<int64_t>(sizeof(uint16_t)), CopyKind::device_to_host);
  for (int64_t i = 0; i < n; ++i) ASSERT_EQ(got[i], 0) << "the dry run wrote the bf16 copy at " << i;
  a.lr = 0.01f;
  be().adamw(with_copy.data(), 2, a, nullptr);
  const std::vector<float> p4 = pf.host();
  be().copy(got.data(), copy, n * static_cast<int64_t>(sizeof(uint16_t)), CopyKind::device_to_host);
  cpu::cast(want.data(), DType::bf16, p4.data(), DType::f32, n);
  for (int64_t i = 0; i < n; ++i) ASSERT_EQ(got[i], want[i]) << "bf16 copy of the updated parameter " << i;
  std::vector<double> pe(p3.begin(), p3.end());
  cpu::adamw<double>(pe.data(), gd.data(), md.data(), vd.data(), split, a, 0.1f);
  cpu::adamw<double>(pe.data() + split, gd.data() + split, md.data() + split, vd.data() + split, n - split, a, 0.0f);
  for (int64_t i = 0; i < n; ++i) ASSERT_NEAR(p4[i], pe[i], 32 * kEps32 * (std::abs(pe[i]) + 0.01)) << i;
  be().release(copy);
  be().release(bad);
}

// Many tensors in one call, as the optimizer makes it (a segment per
// parameter tensor; GPT-2 has ~150): 130 segments of sizes 0 to 3000 (~70K
// elements a launch: more than the dry run's grid has threads, so threads walk from
// tensor to tensor), weight decay on every other one, bf16 copies on some,
// placed in memory with gaps between them whose gradients would overflow;
// each element against the fp64 update of its own segment, the gaps
// untouched. On gpu-emu also the launches: one per batch of kAdamWBatch
// non-empty tensors (adamw.cuh). Then a dry run in which one segment
// overflows counts exactly its elements (a thread that strayed into a gap
// would count more).
TEST_P(Conformance, AdamWManySegmentsInOneCall) {
  NEED_OPS(KernelOp::adamw);
  std::mt19937 gen(7);
  std::uniform_int_distribution<int> size(0, 3000);
  std::vector<int64_t> at, n;  // each segment's offset in the buffers, its size
  int64_t used = 0, nonempty = 0;
  for (int i = 0; i < 130; ++i) {
    used += 3 + i % 5;  // the gap before it
    at.push_back(used);
    n.push_back(i % 17 == 5 ? 0 : size(gen));
    nonempty += n.back() > 0 ? 1 : 0;
    used += n.back();
  }
  Inputs in;
  auto p = in.normal(used), g = in.normal(used), m = in.normal(used, 0.1), v = in.normal(used, 0.01);
  for (auto& x : v) x = std::abs(x);
  std::vector<bool> gap(static_cast<size_t>(used), true);
  for (size_t i = 0; i < n.size(); ++i) std::fill(gap.begin() + at[i], gap.begin() + at[i] + n[i], false);
  for (int64_t j = 0; j < used; ++j) {
    if (gap[j]) g[j] = 3e38;
  }
  F32 pf(be(), p), gf(be(), g), mf(be(), m), vf(be(), v);
  Bf16Buf copy(be(), static_cast<size_t>(used));
  std::vector<AdamWSegment> segs;
  for (size_t i = 0; i < n.size(); ++i) {
    segs.push_back({pf.p + at[i], gf.p + at[i], mf.p + at[i], vf.p + at[i], n[i], i % 2 ? 0.1f : 0.0f,
                    i % 3 == 0 ? copy.p + at[i] : nullptr});
  }
  const AdamWArgs a{.lr = 0.01f, .beta1 = 0.9f, .beta2 = 0.95f, .eps = 1e-8f, .grad_scale = 0.5f, .step = 7};
  // Dry run first: nothing overflows but the gaps, which no segment covers.
  double* bad = static_cast<double*>(be().alloc(sizeof(double)));
  be().adamw(segs.data(), static_cast<int64_t>(segs.size()), a, bad);
  EXPECT_EQ(device_doubles(be(), bad, 1)[0], 0.0) << "the dry run counted an element outside the segments";
  const bool emu = std::string(be().name) == "gpu-emu";
  const int64_t launches = emu ? gpu_emu_launches(be(), "adamw_multi_k") : 0;
  be().adamw(segs.data(), static_cast<int64_t>(segs.size()), a, nullptr);
  if (emu) {
    EXPECT_EQ(gpu_emu_launches(be(), "adamw_multi_k") - launches, (nonempty + gpu::kAdamWBatch - 1) / gpu::kAdamWBatch);
  }
  // p, m and v against fp64 on the same fp32 inputs: a few roundings each.
  std::vector<double> pd = p, gd = g, md = m, vd = v;
  for (size_t i = 0; i < n.size(); ++i) {
    cpu::adamw<double>(pd.data() + at[i], gd.data() + at[i], md.data() + at[i], vd.data() + at[i], n[i], a,
                       i % 2 ? 0.1f : 0.0f);
  }
  const auto ph = pf.host(), mh = mf.host(), vh = vf.host();
  const auto ch = copy.host();
  for (size_t i = 0; i < n.size(); ++i) {
    for (int64_t j = at[i]; j < at[i] + n[i]; ++j) {
      ASSERT_NEAR(ph[j], pd[j], 16 * kEps32 * (std::abs(pd[j]) + 0.01 * (std::abs(md[j]) / std::sqrt(vd[j]) + 1)))
          << "segment " << i << " element " << j - at[i];
      ASSERT_NEAR(mh[j], md[j], 4 * kEps32 * (std::abs(md[j]) + std::abs(gd[j])));
      ASSERT_NEAR(vh[j], vd[j], 4 * kEps32 * (vd[j] + gd[j] * gd[j]));
      const float want = i % 3 == 0 ? cpu::from_bf16(cpu::to_bf16(ph[j])) : 0.0f;
      ASSERT_EQ(ch[j], want) << "bf16 copy, segment " << i;
    }
  }
  for (int64_t j = 0; j < used; ++j) {
    if (gap[j]) {
      ASSERT_EQ(ph[j], static_cast<float>(p[j])) << "a gap was written at " << j;
      ASSERT_EQ(ch[j], 0.0f) << "a gap's bf16 copy was written at " << j;
    }
  }
  // Dry run: segment 40's gradient overflows its m; nothing is written.
  ASSERT_GT(n[40], 0);
  std::vector<float> huge(static_cast<size_t>(n[40]), 3e38f);
  be().copy(gf.p + at[40], huge.data(), n[40] * 4, CopyKind::host_to_device);
  be().adamw(segs.data(), static_cast<int64_t>(segs.size()), a, bad);
  EXPECT_EQ(device_doubles(be(), bad, 1)[0], static_cast<double>(n[40]));
  EXPECT_EQ(pf.host(), ph) << "the dry run wrote parameters";
  be().release(bad);
}

TEST_P(Conformance, TileGemmBf16) {
  NEED_OPS(KernelOp::tile_gemm_bf16);
  // bf16 inputs: their products are exact in fp32, so the only error is the
  // fp32 accumulation of K terms: |err| <= (K + 1) eps32 sum |a b|.
  Inputs in;
  const int64_t M = 32, N = 48, K = 64;
  auto a = in.normal(M * K), b = in.normal(K * N);
  std::vector<float> af(a.begin(), a.end()), bf(b.begin(), b.end());
  std::vector<uint16_t> ah(M * K), bh(K * N);
  cpu::cast(ah.data(), DType::bf16, af.data(), DType::f32, M * K);
  cpu::cast(bh.data(), DType::bf16, bf.data(), DType::f32, K * N);
  cpu::cast(af.data(), DType::f32, ah.data(), DType::bf16, M * K);  // the values the product sees
  cpu::cast(bf.data(), DType::f32, bh.data(), DType::bf16, K * N);
  std::vector<double> want(M * N), tol(M * N);
  for (int64_t i = 0; i < M; ++i)
    for (int64_t j = 0; j < N; ++j) {
      double s = 0, mag = 0;
      for (int64_t k = 0; k < K; ++k) {
        s += static_cast<double>(af[i * K + k]) * bf[k * N + j];
        mag += std::abs(static_cast<double>(af[i * K + k]) * bf[k * N + j]);
      }
      want[i * N + j] = s;
      tol[i * N + j] = (K + 1) * kEps32 * mag + 1e-30;
    }
  auto* A = static_cast<uint16_t*>(be().alloc(M * K * 2));
  auto* B = static_cast<uint16_t*>(be().alloc(K * N * 2));
  be().copy(A, ah.data(), M * K * 2, CopyKind::host_to_device);
  be().copy(B, bh.data(), K * N * 2, CopyKind::host_to_device);
  F32 C(be(), static_cast<size_t>(M * N));
  be().tile_gemm_bf16(C.p, A, B, M, N, K);
  expect_within(C.host(), want, tol, "tile gemm bf16");
  be().release(A);
  be().release(B);
}

INSTANTIATE_TEST_SUITE_P(Backends, Conformance,
                         ::testing::Values("cpu", "cpu-guarded", "gpu-emu-w32", "gpu-emu-w64", "gpu-emu-w64-tiles"),
                         [](const ::testing::TestParamInfo<const char*>& i) {
                           std::string n = i.param;
                           for (char& c : n) c = c == '-' ? '_' : c;
                           return n;
                         });

// One rank per device: rank r of a node's n ranks takes device r when the
// node shows each process its devices, device 0 when each sees only its own
// (srun --gpus-per-task=1), and none when ranks outnumber devices.
TEST(BackendTable, DeviceForRank) {
  EXPECT_EQ(device_for_rank(0, 1, 1), 0);
  EXPECT_EQ(device_for_rank(3, 8, 8), 3);
  EXPECT_EQ(device_for_rank(3, 4, 8), 3);
  EXPECT_EQ(device_for_rank(5, 8, 1), 0);
  EXPECT_EQ(device_for_rank(5, 8, 4), -1);
  EXPECT_EQ(device_for_rank(0, 2, 0), -1);
  EXPECT_EQ(device_for_rank(2, 2, 4), -1);  // a local rank outside its node's count
}

// Ranks that would share one GPU: the first pair in rank order with equal
// identities; unknown ("") identities never match.
TEST(BackendTable, RanksSharingADevice) {
  EXPECT_EQ(ranks_sharing_a_device({}), std::make_pair(-1, -1));
  EXPECT_EQ(ranks_sharing_a_device({"GPU-a", "GPU-b", "GPU-c"}), std::make_pair(-1, -1));
  EXPECT_EQ(ranks_sharing_a_device({"", "", "GPU-a"}), std::make_pair(-1, -1));
  EXPECT_EQ(ranks_sharing_a_device({"GPU-a", "GPU-b", "GPU-b", "GPU-a"}), std::make_pair(1, 2));
  EXPECT_EQ(ranks_sharing_a_device({"GPU-a", "GPU-b", "GPU-c", "GPU-a", "GPU-b"}), std::make_pair(0, 3));
  EXPECT_NE(too_few_devices(8, 4).find("8 ranks run on this node but it has 4 GPUs visible to each"),
            std::string::npos);
}

TEST(BackendTable, IsComplete) {
  const Backend& be = cpu_backend();
  EXPECT_STREQ(be.name, "cpu");
  EXPECT_TRUE(be.supports(KernelOp::gemm, DType::f32));
  EXPECT_FALSE(be.supports(KernelOp::gemm, DType::bf16));
  const auto tpu = make_backend("tpu");
  ASSERT_FALSE(tpu.ok());
  EXPECT_NE(tpu.error().find("is not a backend of this binary; it has: cpu, cpu-guarded, gpu-emu"),
            std::string::npos)
      << tpu.error();
  // Every name listed makes a complete instance (cuda or hip without a GPU:
  // a refusal saying why).
  for (const std::string& name : backend_list()) {
    auto made = make_backend(name);
    if ((name == "cuda" || name == "hip") && !made.ok()) {
      EXPECT_NE(made.error().find("cannot start on this machine: no usable GPU"), std::string::npos)
          << made.error();
      continue;
    }
    ASSERT_TRUE(made.ok()) << made.error();
    EXPECT_STREQ((*made)->name, name.c_str());
    EXPECT_EQ(missing_required_ops(**made), "") << name;
  }
  EXPECT_EQ(backend_names().rfind("cpu, cpu-guarded, gpu-emu", 0), 0u) << backend_names();
  EXPECT_EQ(be.addressing.kind, DeviceAddressing::Kind::host);
  EXPECT_EQ((*make_backend("cpu-guarded"))->addressing.kind, DeviceAddressing::Kind::mapped_host);
  const auto emu = make_gpu_emu_backend({});
  EXPECT_EQ(emu->addressing.kind, DeviceAddressing::Kind::device);
  ASSERT_NE(emu->addressing.queue, nullptr);
  EXPECT_TRUE(emu->addressing.queue->emulated());
  EXPECT_STREQ(emu->addressing.queue->vendor(), "");
}

// Two instances are two devices: cpu, gpu-emu at warp 32 and gpu-emu at
// warp 64 in one process, used in turn, each with its own stream, memory
// and launch counts, give the cpu's results.
// The ring attention ops (the block kernels and copy_columns) are a class of
// their own (cp): every backend here has them, and a table without one names
// it there, not among the required.
TEST(BackendTable, CpOpsAreAClassOfTheirOwn) {
  EXPECT_EQ(kernel_op_need(KernelOp::flash_attention_block_forward), OpNeed::cp);
  EXPECT_EQ(kernel_op_need(KernelOp::flash_attention_block_backward), OpNeed::cp);
  EXPECT_EQ(kernel_op_need(KernelOp::copy_columns), OpNeed::cp);
  for (const char* name : {"cpu", "cpu-guarded"}) EXPECT_EQ(missing_cp_ops(**make_backend(name)), "") << name;
  EXPECT_EQ(missing_cp_ops(*make_gpu_emu_backend({})), "");
  BackendOps ops = cpu_backend().ops();
  ops.flash_attention_block_backward = nullptr;
  const Backend partial = cpu_backend().with_ops("partial", ops, nullptr);
  EXPECT_EQ(missing_cp_ops(partial), "flash_attention_block_backward");
  EXPECT_EQ(missing_required_ops(partial), "");
  ops.copy_columns = nullptr;
  const Backend no_pack = cpu_backend().with_ops("partial", ops, nullptr);
  EXPECT_EQ(missing_cp_ops(no_pack), "flash_attention_block_backward, copy_columns");
  EXPECT_EQ(missing_required_ops(no_pack), "");
}

TEST(BackendTable, BackendsLiveSideBySide) {
  const Backend& cpu = cpu_backend();
  GpuEmuOptions w64;
  w64.warp = 64;
  const auto a = make_gpu_emu_backend({}), b = make_gpu_emu_backend(w64);
  Inputs in;
  const int64_t N = 37, C = 19;
  const auto x = in.normal(N * C), g = in.normal(C), bias = in.normal(C);
  std::vector<float> want(static_cast<size_t>(N * C)), mean(N), rstd(N);
  std::vector<float> xf(x.begin(), x.end()), gf(g.begin(), g.end()), bf(bias.begin(), bias.end());
  cpu.layernorm_forward(want.data(), mean.data(), rstd.data(), xf.data(), gf.data(), bf.data(), N, C);
  for (int round = 0; round < 2; ++round) {
    for (const Backend* be : {a.get(), b.get()}) {
      F32 X(*be, x), G(*be, g), Bi(*be, bias), out(*be, want.size()), mu(*be, N), rs(*be, N);
      be->layernorm_forward(out.p, mu.p, rs.p, X.p, G.p, Bi.p, N, C);
      const auto got = out.host();
      for (size_t i = 0; i < want.size(); ++i) ASSERT_NEAR(got[i], want[i], 1e-5) << be->name << " element " << i;
    }
  }
  EXPECT_EQ(gpu_emu_launches(*a, "layernorm_forward_k"), 2);
  EXPECT_EQ(gpu_emu_launches(*b, "layernorm_forward_k"), 2);
  EXPECT_EQ(gpu_emu_compute_stream(*a).warp(), 32);
  EXPECT_EQ(gpu_emu_compute_stream(*b).warp(), 64);
}

// gpu-emu's stream is asynchronous: a launch returns before it runs (lazy:
// it runs only once something waits for it), a device-to-host copy waits.
TEST(BackendTable, GpuEmuRunsOpsOnAnAsynchronousStream) {
  const auto be = make_gpu_emu_backend({});
  DeviceQueue& q = *be->addressing.queue;
  auto* d = static_cast<float*>(be->alloc(1024 * sizeof(float)));
  be->fill(d, DType::f32, 2.0, 1024);
  gpu::emu::Stream& s = gpu_emu_compute_stream(*be);
  EXPECT_GT(s.issued(), 0u);
  EXPECT_EQ(s.completed(), 0u) << "a lazy stream ran work nobody waited for";
  DeviceQueue::Event e = q.event_create();
  q.event_record(e, DeviceStream::compute);
  q.event_wait(e);
  EXPECT_TRUE(q.event_done(e));
  std::vector<float> h(1024);
  be->copy(h.data(), d, 1024 * sizeof(float), CopyKind::device_to_host);
  EXPECT_EQ(h[1023], 2.0f);
  q.event_destroy(e);
  be->release(d);
}

TEST(BackendTable, OneOpListGivesFieldsNamesAndTheProfiler) {
  const Backend& cpu = cpu_backend();
  EXPECT_EQ(missing_required_ops(cpu), "");
  EXPECT_STREQ(kernel_op_name(KernelOp::linear_forward), "linear_forward");
  EXPECT_STREQ(kernel_op_name(KernelOp::sum_squares), "sum_squares");
  EXPECT_FALSE(kernel_op_required(KernelOp::gemm));
  EXPECT_TRUE(kernel_op_required(KernelOp::adamw));
  std::set<std::string> names;
  for (int i = 0; i < kKernelOps; ++i) names.insert(kernel_op_name(static_cast<KernelOp>(i)));
  EXPECT_EQ(static_cast<int>(names.size()), kKernelOps);
  // A table without a required op says which.
  BackendOps ops = cpu.ops();
  ops.attention_backward = nullptr;
  ops.gemm = nullptr;  // optional: not reported
  const Backend partial = cpu.with_ops("partial", ops, nullptr);
  EXPECT_EQ(missing_required_ops(partial), "attention_backward");
  // The profiler wraps every op the inner table has, forwards it, and counts it.
  const auto prof = make_profiling_backend(cpu);
  EXPECT_EQ(missing_required_ops(*prof), "");
  profiling_reset(*prof);
  std::vector<float> x = {1, 2, 3, 4}, w = {0.5f, -1, 2, 0.25f}, y(4), y_ref(4);
  prof->linear_forward(y.data(), x.data(), w.data(), nullptr, 2, 2, 2);
  cpu.linear_forward(y_ref.data(), x.data(), w.data(), nullptr, 2, 2, 2);
  EXPECT_EQ(y, y_ref);
  double sq = 0;
  const SegmentRef seg{x.data(), 4, 0};
  prof->sum_squares(&sq, &seg, 1, 1);
  EXPECT_DOUBLE_EQ(sq, 30.0);
  const std::string report = profiling_report(*prof);
  EXPECT_NE(report.find("linear_forward"), std::string::npos) << report;
  EXPECT_NE(report.find("sum_squares"), std::string::npos) << report;
  EXPECT_EQ(report.find("attention_forward"), std::string::npos) << report;  // never called
  profiling_reset(*prof);
}

// The profiler forwards every hook of an asynchronous backend, and an op it
// times has run when it returns (it synchronizes around each op): on
// gpu-emu's lazy stream nothing else would have made it run.
TEST(BackendTable, ProfilerForwardsEveryHookAndWaitsForTheOp) {
  GpuEmuOptions o;
  o.memory = int64_t{64} << 20;
  const auto inner = make_gpu_emu_backend(o);
  const auto prof = make_profiling_backend(*inner);
#define TERA_EXPECT_HOOK(hook, Fn) \
  EXPECT_EQ(prof->ops().hook != nullptr, inner->ops().hook != nullptr) << #hook;
  TERA_BACKEND_HOOKS(TERA_EXPECT_HOOK)
#undef TERA_EXPECT_HOOK
  EXPECT_TRUE(prof->binds_devices());
  EXPECT_TRUE(prof->reports_memory());
  EXPECT_EQ(prof->memory_available(), inner->memory_available());
  EXPECT_EQ(prof->bind_device(0, 1), "");
  EXPECT_EQ(prof->device_identity(), inner->device_identity());
  EXPECT_EQ(prof->addressing.queue, inner->addressing.queue);
  gpu::emu::Stream& s = gpu_emu_compute_stream(*inner);
  auto* d = static_cast<float*>(prof->alloc(4096 * sizeof(float)));
  prof->fill(d, DType::f32, 1.0, 4096);
  EXPECT_TRUE(s.done(s.issued())) << "the profiled fill returned before it ran";
  EXPECT_GT(profiling_seconds(*prof, "fill"), 0.0);
  prof->release(d);
}

}  // namespace
}  // namespace tera
