// tera-device-check: the GPU backends' ops against fp64 references, on the
// backend named on the command line, and (with --bench) their speed.
//
//   tera-device-check gpu-emu [--small] [--warp 32|64]   (CI: the SIMT emulator)
//   tera-device-check cuda [--bench] [--json FILE]       (a GPU node: scripts/device-check)
//
// Each check prints one line (name, worst error / bound, pass or FAIL); the
// exit status is 1 if any fails. Bounds are derived from the arithmetic, as in
// tests/kernels/test_conformance.cpp: an fp32 result of a sum of K terms is
// within K * 2^-24 * (sum of |terms|) of the fp64 value on the same inputs;
// with bf16 GEMM inputs each rounded operand adds a relative 2^-8 (bf16's
// unit roundoff) to every product term, so |err| <= (r 2^-8 + K 2^-24) sum
// |terms| with r the number of rounded operands (the weights arrive in bf16
// and are exact; activations and output gradients are rounded).
// Shapes are GPT-2-sized on a GPU and odd-sized (not multiples of the block)
// everywhere. This program needs no library beyond the backend's: it builds
// on a GPU node that has only the CUDA toolkit.
#include <array>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <functional>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "kernels/backend.h"
#include "kernels/backend_registry.h"
#include "kernels/cpu/cpu_ops.h"
#include "../kernels/flash_bf16_bound.h"
#include "../kernels/linear_gelu_bound.h"
#if defined(TERA_HAVE_CUDA)
#include "kernels/gpu/cuda/backend_cuda.h"
#endif
#if defined(TERA_HAVE_GPU_EMU)
#include "kernels/gpu/emu/backend_gpu_emu.h"
#include "kernels/gpu/emu/emulator.h"
#endif
#if defined(TERA_HAVE_HIP)
#include "kernels/gpu/hip/backend_hip.h"
#endif

namespace tera {
namespace {

constexpr double kEps32 = 5.96e-8;   // 2^-24
constexpr double kEpsBf16 = 3.91e-3;  // 2^-8: bf16's unit roundoff (8 significant bits)

struct Result {
  explicit Result(std::string n) : name(std::move(n)) {}
  std::string name;
  double worst_ratio = 0;  // max |err| / bound over elements (pass: <= 1)
  bool pass = true;
  std::string note;
};

std::vector<Result> g_results;

// Device buffer of T filled from host values; host() reads it back.
template <typename T>
struct Buf {
  const Backend& be;
  T* p = nullptr;
  size_t n;
  Buf(const Backend& b, size_t count) : be(b), n(count) {
    p = static_cast<T*>(be.alloc(static_cast<int64_t>(n * sizeof(T))));
    if (p == nullptr) {
      std::fprintf(stderr, "device-check: out of device memory for %zu bytes\n", n * sizeof(T));
      std::exit(2);
    }
    be.fill(p, sizeof(T) == 8 ? DType::f64 : (sizeof(T) == 2 ? DType::bf16 : DType::f32), 0.0, static_cast<int64_t>(n));
  }
  Buf(const Backend& b, const std::vector<T>& v) : Buf(b, v.size()) { put(v); }
  Buf(const Buf&) = delete;
  Buf& operator=(const Buf&) = delete;
  ~Buf() { be.release(p); }
  void put(const std::vector<T>& v) {
    be.copy(p, v.data(), static_cast<int64_t>(v.size() * sizeof(T)), CopyKind::host_to_device);
  }
  std::vector<T> host() const {
    std::vector<T> h(n);
    be.copy(h.data(), p, static_cast<int64_t>(n * sizeof(T)), CopyKind::device_to_host);
    return h;
  }
};

std::mt19937_64 g_gen{2026};
std::vector<float> normal(size_t n, double sd = 1.0) {
  std::normal_distribution<double> d(0.0, sd);
  std::vector<float> v(n);
  for (auto& x : v) x = static_cast<float>(d(g_gen));
  return v;
}
std::vector<double> widen(const std::vector<float>& v) { return {v.begin(), v.end()}; }
// bf16 values as fp32 (exact).
std::vector<float> from_bf16(const std::vector<uint16_t>& h) {
  std::vector<float> v(h.size());
  cpu::cast(v.data(), DType::f32, h.data(), DType::bf16, static_cast<int64_t>(h.size()));
  return v;
}
// Rounds v to bf16 numbers in place (the reference then sees what the device
// reads) and returns their bf16 bits.
std::vector<uint16_t> round_to_bf16(std::vector<float>& v) {
  std::vector<uint16_t> h(v.size());
  cpu::cast(h.data(), DType::bf16, v.data(), DType::f32, static_cast<int64_t>(v.size()));
  v = from_bf16(h);
  return h;
}

// Compares got to ref with a per-element bound; records the worst ratio.
void compare(const char* name, const std::vector<float>& got, const std::vector<double>& ref,
             const std::function<double(size_t)>& bound) {
  Result r{name};
  for (size_t i = 0; i < ref.size(); ++i) {
    const double err = std::abs(static_cast<double>(got[i]) - ref[i]);
    const double b = bound(i);
    const double ratio = b > 0 ? err / b : (err == 0 ? 0 : INFINITY);
    if (!(ratio <= 1.0)) {
      if (r.pass) r.note = "element " + std::to_string(i) + ": got " + std::to_string(got[i]) + ", want " +
                           std::to_string(ref[i]) + ", bound " + std::to_string(b);
      r.pass = false;
    }
    if (ratio > r.worst_ratio || std::isnan(ratio)) r.worst_ratio = std::isnan(ratio) ? INFINITY : ratio;
  }
  std::printf("  %-36s worst err/bound %.3g  %s%s%s\n", name, r.worst_ratio, r.pass ? "pass" : "FAIL",
              r.note.empty() ? "" : "  ", r.note.c_str());
  g_results.push_back(r);
}

// Checks got equals want bit for bit (a result the op's contract says it
// reproduces exactly on one backend).
void compare_bits(const std::string& name, const std::vector<float>& got, const std::vector<float>& want) {
  Result r{name};
  r.pass = got.size() == want.size() && std::memcmp(got.data(), want.data(), got.size() * sizeof(float)) == 0;
  std::printf("  %-36s %s\n", r.name.c_str(), r.pass ? "pass" : "FAIL");
  g_results.push_back(r);
}

// ---------------------------------------------------------------- checks

void check_layernorm(const Backend& be, int64_t N, int64_t C) {
  auto x = normal(N * C, 2.0), g = normal(C), b = normal(C), dout = normal(N * C), dx0 = normal(N * C);
  std::vector<double> xd = widen(x), gd = widen(g), bd = widen(b), dyd = widen(dout), y(N * C), mean(N), rstd(N);
  cpu::layernorm_forward<double>(y.data(), mean.data(), rstd.data(), xd.data(), gd.data(), bd.data(), N, C);
  std::vector<double> dx = widen(dx0), dg(C, 0.0), db(C, 0.0);
  cpu::layernorm_backward<double>(dx.data(), dg.data(), db.data(), dyd.data(), xd.data(), gd.data(), mean.data(),
                                  rstd.data(), N, C);
  Buf<float> xf(be, x), gf(be, g), bf(be, b), yf(be, N * C), mf(be, N), rf(be, N), dyf(be, dout), dxf(be, dx0),
      dgf(be, C), dbf(be, C);
  be.layernorm_forward(yf.p, mf.p, rf.p, xf.p, gf.p, bf.p, N, C);
  // Row statistics are sums of C terms: mean, variance and so rstd carry a
  // relative error of about C eps32; y = xhat g + b inherits it.
  const double k = (2.0 * C + 8) * kEps32;
  std::vector<double> row_abs(N, 0.0), mean_dxhat(N, 0.0), mean_dxhat_xhat(N, 0.0);
  for (int64_t n = 0; n < N; ++n) {
    for (int64_t c = 0; c < C; ++c) {
      const double xhat = (xd[n * C + c] - mean[n]) * rstd[n], dxhat = dyd[n * C + c] * gd[c];
      row_abs[n] += std::abs(xd[n * C + c]) / C;
      mean_dxhat[n] += std::abs(dxhat) / C;
      mean_dxhat_xhat[n] += std::abs(dxhat * xhat) / C;
    }
  }
  compare("layernorm_forward", yf.host(), y, [&](size_t i) {
    const int64_t n = i / C, c = i % C;
    const double xhat = (xd[i] - mean[n]) * rstd[n];
    return k * (std::abs(xhat * gd[c]) + std::abs(gd[c]) * rstd[n] * row_abs[n] + std::abs(bd[c])) + 1e-30;
  });
  be.layernorm_backward(dxf.p, dgf.p, dbf.p, dyf.p, xf.p, gf.p, mf.p, rf.p, N, C);
  compare("layernorm_backward dx", dxf.host(), dx, [&](size_t i) {
    const int64_t n = i / C, c = i % C;
    const double xhat = (xd[i] - mean[n]) * rstd[n];
    return 2 * k * (rstd[n] * (std::abs(dyd[i] * gd[c]) + mean_dxhat[n] + std::abs(xhat) * mean_dxhat_xhat[n]) +
                    std::abs(dx0[i])) + 1e-30;
  });
  std::vector<double> sg(C, 0.0), sb(C, 0.0);
  for (int64_t n = 0; n < N; ++n)
    for (int64_t c = 0; c < C; ++c) {
      sg[c] += std::abs(dyd[n * C + c] * (xd[n * C + c] - mean[n]) * rstd[n]);
      sb[c] += std::abs(dyd[n * C + c]);
    }
  compare("layernorm_backward dg", dgf.host(), dg, [&](size_t c) { return (N + 2.0 * C + 8) * kEps32 * sg[c] + 1e-30; });
  compare("layernorm_backward db", dbf.host(), db, [&](size_t c) { return (N + 2.0) * kEps32 * sb[c] + 1e-30; });
}

void check_gelu(const Backend& be, int64_t n) {
  auto x = normal(n, 3.0), dout = normal(n);
  std::vector<double> xd = widen(x), dyd = widen(dout), y(n), dx(n);
  cpu::gelu_forward<double>(y.data(), xd.data(), n);
  cpu::gelu_backward<double>(dx.data(), xd.data(), dyd.data(), n);
  Buf<float> xf(be, x), dyf(be, dout), yf(be, n), dxf(be, n);
  be.gelu_forward(yf.p, xf.p, n);
  be.gelu_backward(dxf.p, xf.p, dyf.p, n);
  // fp32 tanh is within a few ulps: a few eps32 absolute, times |x| (and x^2 in the derivative).
  compare("gelu_forward", yf.host(), y, [&](size_t i) { return 16 * kEps32 * (1 + std::abs(xd[i])); });
  compare("gelu_backward", dxf.host(), dx, [&](size_t i) {
    return 16 * kEps32 * (1 + std::abs(xd[i]) * (1 + xd[i] * xd[i])) * std::abs(dyd[i]) + 1e-30;
  });
}

void check_residuals(const Backend& be, int64_t N, int64_t C) {
  auto a = normal(N * C), bias = normal(C), r = normal(N * C);
  Buf<float> af(be, a), bf(be, bias), rf(be, r), out(be, N * C);
  be.residual_forward(out.p, af.p, rf.p, N * C);
  std::vector<double> want(N * C);
  for (int64_t i = 0; i < N * C; ++i) want[i] = a[i] + r[i];  // one fp32 addition: exact to compare in fp32
  std::vector<double> want32(N * C);
  for (int64_t i = 0; i < N * C; ++i) want32[i] = static_cast<float>(a[i] + r[i]);
  compare("residual_forward (exact)", out.host(), want32, [](size_t) { return 0.0; });
  be.bias_residual(out.p, af.p, bf.p, rf.p, N, C);
  for (int64_t i = 0; i < N * C; ++i) want32[i] = (a[i] + bias[i % C]) + r[i];
  compare("bias_residual (exact)", out.host(), want32, [](size_t) { return 0.0; });
}

// Integer-valued data: every partial sum is exact, so the result must equal
// the closed form exactly, whatever the order of the reduction.
void check_reductions(const Backend& be, int64_t m) {
  std::vector<float> x(m);
  for (int64_t i = 0; i < m; ++i) x[i] = static_cast<float>(i % 8);
  x[m / 3] = INFINITY;  // group 0
  x[m / 2] = NAN;       // in no segment
  Buf<float> xf(be, x);
  Buf<double> out(be, 3);
  const std::vector<SegmentRef> segs = {{xf.p, m / 2, 0}, {xf.p + m / 2 + 1, m - m / 2 - 1, 2}};
  be.count_nonfinite(out.p, segs.data(), 2, 3);
  const auto nf = out.host();
  Result r{"count_nonfinite (exact)"};
  r.pass = nf[0] == 1 && nf[1] == 0 && nf[2] == 0;
  x[m / 3] = 0;
  xf.put(x);
  be.sum_squares(out.p, segs.data(), 2, 3);
  const auto sq = out.host();
  double want0 = 0, want2 = 0, want_acc = 2.5;
  for (int64_t i = 0; i < m / 2; ++i) want0 += static_cast<double>(x[i]) * x[i];
  for (int64_t i = m / 2 + 1; i < m; ++i) want2 += static_cast<double>(x[i]) * x[i];
  for (int64_t i = 0; i < m / 2; ++i) want_acc += x[i];
  Result r2{"sum_squares (exact)"};
  r2.pass = sq[0] == want0 && sq[1] == 0 && sq[2] == want2;
  Buf<double> acc(be, 1);
  be.fill(acc.p, DType::f64, 2.5, 1);
  be.accumulate_sum(acc.p, xf.p, m / 2);
  Result r3{"accumulate_sum (exact)"};
  r3.pass = acc.host()[0] == want_acc;
  for (Result* q : {&r, &r2, &r3}) {
    std::printf("  %-36s %s\n", q->name.c_str(), q->pass ? "pass" : "FAIL");
    g_results.push_back(*q);
  }
}

void check_adamw(const Backend& be, int64_t n) {
  auto p = normal(n), g = normal(n, 0.1), m = normal(n, 0.01), v = normal(n, 0.001);
  for (auto& q : v) q = q * q;  // second moments are non-negative
  Buf<float> pf(be, p), gf(be, g), mf(be, m), vf(be, v);
  const int64_t half = n / 2;
  const std::vector<AdamWSegment> segs = {{pf.p, gf.p, mf.p, vf.p, half, 0.1f},
                                          {pf.p + half, gf.p + half, mf.p + half, vf.p + half, n - half, 0.0f}};
  const AdamWArgs a{.lr = 3e-4f, .beta1 = 0.9f, .beta2 = 0.95f, .eps = 1e-8f, .grad_scale = 0.7f, .step = 7};
  Buf<double> bad(be, 1);
  be.adamw(segs.data(), 2, a, bad.p);
  Result dry{"adamw dry run (no write, 0 bad)"};
  dry.pass = bad.host()[0] == 0 && pf.host() == p;
  std::printf("  %-36s %s\n", dry.name.c_str(), dry.pass ? "pass" : "FAIL");
  g_results.push_back(dry);
  be.adamw(segs.data(), 2, a, nullptr);
  std::vector<double> pd = widen(p), gd = widen(g), md = widen(m), vd = widen(v);
  cpu::adamw<double>(pd.data(), gd.data(), md.data(), vd.data(), half, a, 0.1f);
  cpu::adamw<double>(pd.data() + half, gd.data() + half, md.data() + half, vd.data() + half, n - half, a, 0.0f);
  // A handful of fp32 operations per element, each relative to the terms it
  // adds: the decayed weight and the step for p, beta1 m and (1 - beta1) g for m.
  compare("adamw param", pf.host(), pd, [&](size_t i) {
    const double decayed = p[i] * (1.0 - 3e-4 * (static_cast<int64_t>(i) < half ? 0.1 : 0.0));
    return 16 * kEps32 * (std::abs(decayed) + std::abs(pd[i] - decayed)) + 1e-30;
  });
  compare("adamw m", mf.host(), md, [&](size_t i) {
    return 8 * kEps32 * (0.9 * std::abs(m[i]) + 0.1 * 0.7 * std::abs(g[i])) + 1e-30;
  });
}

void check_cast(const Backend& be, int64_t n) {
  auto x = normal(n, 100.0);
  x[0] = 1.0f + std::ldexp(1.0f, -8);                        // a tie: to even (1)
  x[1] = 1.0f + 3 * std::ldexp(1.0f, -8);                    // a tie: up to 1 + 2^-6
  std::vector<uint16_t> want(n);
  cpu::cast(want.data(), DType::bf16, x.data(), DType::f32, n);
  Buf<float> xf(be, x);
  Buf<uint16_t> hf(be, n);
  be.cast(hf.p, DType::bf16, xf.p, DType::f32, n);
  Result r{"cast f32->bf16 (bitwise = CPU's)"};
  r.pass = hf.host() == want;
  std::printf("  %-36s %s\n", r.name.c_str(), r.pass ? "pass" : "FAIL");
  g_results.push_back(r);
}

// y = x W^T + b and its backward in fp32, or with bf16 inputs (W given in bf16).
void check_linear(const Backend& be, int64_t N, int64_t I, int64_t O, bool bf16) {
  auto x = normal(N * I), W = normal(O * I, 0.05), b = normal(O), dy = normal(N * O);
  std::vector<uint16_t> Wb;
  if (bf16) Wb = round_to_bf16(W);  // the reference sees the bf16 weights
  std::vector<double> y(N * O), dx(N * I), dW(O * I, 0.0), db(O, 0.0), ay(N * O), adx(N * I), adW(O * I), adb(O);
#pragma omp parallel for schedule(static)
  for (int64_t n = 0; n < N; ++n)
    for (int64_t o = 0; o < O; ++o) {
      double s = b[o], a = 0;
      for (int64_t i = 0; i < I; ++i) {
        s += static_cast<double>(x[n * I + i]) * W[o * I + i];
        a += std::abs(static_cast<double>(x[n * I + i]) * W[o * I + i]);
      }
      y[n * O + o] = s;
      ay[n * O + o] = a + std::abs(b[o]);
    }
#pragma omp parallel for schedule(static)
  for (int64_t n = 0; n < N; ++n)
    for (int64_t i = 0; i < I; ++i) {
      double s = 0, a = 0;
      for (int64_t o = 0; o < O; ++o) {
        s += static_cast<double>(dy[n * O + o]) * W[o * I + i];
        a += std::abs(static_cast<double>(dy[n * O + o]) * W[o * I + i]);
      }
      dx[n * I + i] = s;
      adx[n * I + i] = a;
    }
#pragma omp parallel for schedule(static)
  for (int64_t o = 0; o < O; ++o) {
    double sb = 0, ab = 0;
    for (int64_t i = 0; i < I; ++i) {
      double s = 0, a = 0;
      for (int64_t n = 0; n < N; ++n) {
        s += static_cast<double>(dy[n * O + o]) * x[n * I + i];
        a += std::abs(static_cast<double>(dy[n * O + o]) * x[n * I + i]);
      }
      dW[o * I + i] = s;
      adW[o * I + i] = a;
    }
    for (int64_t n = 0; n < N; ++n) {
      sb += dy[n * O + o];
      ab += std::abs(dy[n * O + o]);
    }
    db[o] = sb;
    adb[o] = ab;
  }
  // fp32: K eps32 sum|terms|; bf16 inputs: x or dy rounded in y and dx (one
  // operand, 2^-8), dy and x both rounded in dW (2 * 2^-8).
  const double r = bf16 ? kEpsBf16 : 0.0;
  Buf<float> xf(be, x), bf(be, b), dyf(be, dy), yf(be, N * O), dxf(be, N * I), dWf(be, O * I), dbf(be, O);
  const std::string tag = bf16 ? "linear bf16 " : "linear fp32 ";
  // The zero-bubble split (ops.h): B (dx alone), then W (dW and db alone),
  // into buffers of their own, must give the full call's bits.
  Buf<float> dxs(be, N * I), dWs(be, O * I), dbs(be, O);
  if (bf16) {
    // The model hands the linear layers x in bf16 (rounded once by cast).
    Buf<uint16_t> Wf(be, Wb), xb(be, N * I), cast(be, N * O);
    be.cast(xb.p, DType::bf16, xf.p, DType::f32, N * I);
    be.linear_forward_bf16(yf.p, xb.p, Wf.p, bf.p, N, I, O);
    be.linear_backward_bf16(dxf.p, dWf.p, dbf.p, dyf.p, xb.p, Wf.p, N, I, O, false, cast.p);
    be.linear_backward_bf16(dxs.p, nullptr, nullptr, dyf.p, xb.p, Wf.p, N, I, O, false, cast.p);
    be.linear_backward_bf16(nullptr, dWs.p, dbs.p, dyf.p, xb.p, Wf.p, N, I, O, false, cast.p);
  } else {
    Buf<float> Wf(be, W);
    be.linear_forward(yf.p, xf.p, Wf.p, bf.p, N, I, O);
    be.linear_backward(dxf.p, dWf.p, dbf.p, dyf.p, xf.p, Wf.p, N, I, O, false);
    be.linear_backward(dxs.p, nullptr, nullptr, dyf.p, xf.p, Wf.p, N, I, O, false);
    be.linear_backward(nullptr, dWs.p, dbs.p, dyf.p, xf.p, Wf.p, N, I, O, false);
  }
  compare_bits(tag + "dx of B (bitwise)", dxs.host(), dxf.host());
  compare_bits(tag + "dW of W (bitwise)", dWs.host(), dWf.host());
  compare_bits(tag + "db of W (bitwise)", dbs.host(), dbf.host());
  compare((tag + "y").c_str(), yf.host(), y, [&](size_t i) { return (r + (I + 2) * kEps32) * ay[i] + 1e-30; });
  compare((tag + "dx").c_str(), dxf.host(), dx, [&](size_t i) { return (r + (O + 2) * kEps32) * adx[i] + 1e-30; });
  compare((tag + "dW").c_str(), dWf.host(), dW, [&](size_t i) { return (2 * r + (N + 2) * kEps32) * adW[i] + 1e-30; });
  compare((tag + "db").c_str(), dbf.host(), db, [&](size_t i) { return (N + 2) * kEps32 * adb[i] + 1e-30; });
}

// The GELU MLP's fused bf16 ops (cuBLASLt's GELU_AUX_BIAS epilogue on cuda
// where it has an algorithm, else the GEMM and a GELU pass; the backward
// as the dx GEMM and a GELU-gradient pass) against fp64 within
// linear_gelu_bound.h's bounds: the up-projection [N, I] -> [N, O] with
// its GELU, then the down-projection's backward. On cuda the forward's
// bound allows for the epilogue's hardware tanh.
void check_linear_gelu(const Backend& be, int64_t N, int64_t I, int64_t O) {
  auto x = normal(N * I), W = normal(O * I, 0.05);
  const std::vector<uint16_t> xh = round_to_bf16(x), Wh = round_to_bf16(W);
  const auto b = normal(O);
  const double tanh_error = std::string(be.name) == "cuda" ? testing::kApproxTanhError : 0.0;
  const testing::LinearGeluForwardRef f =
      testing::linear_gelu_forward_ref(widen(x), widen(W), widen(b), N, I, O, tanh_error);
  Buf<uint16_t> xb(be, xh), Wb(be, Wh), act(be, N * O), pre(be, N * O);
  Buf<float> bf(be, b), work(be, N * O);
  be.linear_gelu_forward_bf16(act.p, pre.p, xb.p, Wb.p, bf.p, N, I, O, work.p);
  const std::vector<float> preh = from_bf16(pre.host()), acth = from_bf16(act.host());
  const std::string tag = "linear_gelu bf16 " + std::to_string(N) + "x" + std::to_string(I) + "x" + std::to_string(O) + " ";
  compare((tag + "pre").c_str(), preh, f.pre, [&](size_t i) { return f.tol_pre[i]; });
  compare((tag + "act").c_str(), acth, f.act, [&](size_t i) { return f.tol_act[i]; });
  // The down-projection W2[I, O] reading act, its GELU gradient at pre.
  auto W2 = normal(I * O, 0.05);
  const std::vector<uint16_t> W2h = round_to_bf16(W2);
  const auto dy = normal(N * I), dW0 = normal(I * O), db0 = normal(I);
  const testing::LinearGeluBackwardRef g = testing::linear_backward_gelu_ref(
      widen(dy), widen(acth), widen(W2), widen(preh), widen(dW0), widen(db0), N, O, I);
  Buf<uint16_t> W2b(be, W2h), cast(be, N * I);
  Buf<float> dyf(be, dy), dpre(be, N * O), dW(be, dW0), db(be, db0);
  be.linear_backward_gelu_bf16(dpre.p, dW.p, db.p, dyf.p, act.p, W2b.p, pre.p, N, O, I, cast.p);
  compare((tag + "dpre").c_str(), dpre.host(), g.dpre, [&](size_t i) { return g.tol_dpre[i]; });
  compare((tag + "dW").c_str(), dW.host(), g.dW, [&](size_t i) { return g.tol_dW[i]; });
  compare((tag + "db").c_str(), db.host(), g.db, [&](size_t i) { return g.tol_db[i]; });
  // The zero-bubble split (ops.h): B is the fused op without dW and db, W
  // the plain bf16 backward without dx; each gives the full call's bits.
  Buf<float> dpres(be, N * O), dWs(be, dW0), dbs(be, db0);
  be.linear_backward_gelu_bf16(dpres.p, nullptr, nullptr, dyf.p, act.p, W2b.p, pre.p, N, O, I, cast.p);
  be.linear_backward_bf16(nullptr, dWs.p, dbs.p, dyf.p, act.p, W2b.p, N, O, I, false, cast.p);
  compare_bits(tag + "dpre of B (bitwise)", dpres.host(), dpre.host());
  compare_bits(tag + "dW of W (bitwise)", dWs.host(), dW.host());
  compare_bits(tag + "db of W (bitwise)", dbs.host(), db.host());
}

// The tile primitive (tensor cores on cuda) over a whole product: bf16
// inputs, so products are exact and the bound is fp32 accumulation alone.
void check_tile_gemm(const Backend& be, int64_t M, int64_t N, int64_t K) {
  auto a = normal(M * K), b = normal(K * N);
  const std::vector<uint16_t> ah = round_to_bf16(a), bh = round_to_bf16(b);
  std::vector<double> want(M * N), mag(M * N);
#pragma omp parallel for schedule(static)
  for (int64_t i = 0; i < M; ++i)
    for (int64_t j = 0; j < N; ++j) {
      double s = 0, m = 0;
      for (int64_t k = 0; k < K; ++k) {
        s += static_cast<double>(a[i * K + k]) * b[k * N + j];
        m += std::abs(static_cast<double>(a[i * K + k]) * b[k * N + j]);
      }
      want[i * N + j] = s;
      mag[i * N + j] = m;
    }
  Buf<uint16_t> A(be, ah), B(be, bh);
  Buf<float> C(be, M * N);
  be.tile_gemm_bf16(C.p, A.p, B.p, M, N, K);
  compare("tile_gemm_bf16 (mma primitive)", C.host(), want, [&](size_t i) { return (K + 1) * kEps32 * mag[i] + 1e-30; });
}

// bf16 flash attention (train.precision = "bf16": qkv and the kept output in
// bf16, dout fp32) against the fp64 flash kernels on the same bf16 numbers,
// within the bound derived in tests/kernels/flash_bf16_bound.h. Shapes with
// T and hs multiples of 16 run the tile-primitive kernels
// (flash_attention_tc.cuh: tensor cores on cuda), others the scalar ones.
void check_flash_bf16(const Backend& be, int64_t B, int64_t T, int64_t H, int64_t KV, int64_t hs) {
  const int64_t C = H * hs, W = (H + 2 * KV) * hs;
  auto q32 = normal(B * T * W);
  const std::vector<uint16_t> qb = round_to_bf16(q32);
  const std::vector<double> qkv = widen(q32);
  const auto Rf = normal(B * T * C);
  const std::vector<double> R = widen(Rf);
  std::vector<double> y(B * T * C), lse(B * H * T), dqkv(qkv.size());
  cpu::flash_attention_forward<double>(y.data(), lse.data(), qkv.data(), B, T, H, KV, hs);
  cpu::flash_attention_backward<double>(dqkv.data(), R.data(), qkv.data(), y.data(), lse.data(), B, T, H, KV, hs);
  const testing::FlashBf16Bounds tol = testing::flash_bf16_bounds(qkv, R, y, lse, B, T, H, KV, hs);
  Buf<uint16_t> qd(be, qb), yb(be, y.size());
  Buf<float> dy(be, Rf), yd(be, y.size()), ld(be, lse.size()), dq(be, qkv.size());
  be.flash_attention_forward_bf16(yd.p, ld.p, qd.p, B, T, H, KV, hs);
  be.cast(yb.p, DType::bf16, yd.p, DType::f32, static_cast<int64_t>(y.size()));
  be.flash_attention_backward_bf16(dq.p, dy.p, qd.p, yb.p, ld.p, B, T, H, KV, hs);
  const std::string tag = "flash bf16 " + std::to_string(B) + "x" + std::to_string(T) + "x" + std::to_string(H) + "/" +
                          std::to_string(KV) + "x" + std::to_string(hs) + " ";
  compare((tag + "out").c_str(), yd.host(), y, [&](size_t i) { return tol.y[i]; });
  compare((tag + "lse").c_str(), ld.host(), lse, [&](size_t i) { return tol.lse[i]; });
  compare((tag + "dqkv").c_str(), dq.host(), dqkv, [&](size_t i) { return tol.dqkv[i]; });
}

// ---------------------------------------------------------------- benchmarks

struct Bench {
  std::string name;
  double ms;
  double rate;
  const char* unit;
};
std::vector<Bench> g_bench;

double time_ms(const Backend& be, int iters, const std::function<void()>& f) {
  f();  // warm-up (and cuBLASLt's heuristics)
  be.synchronize();
  const auto t0 = std::chrono::steady_clock::now();
  for (int i = 0; i < iters; ++i) f();
  be.synchronize();
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count() / iters;
}

void bench(const Backend& be) {
  // The 1.3B GPT's MLP up-projection on 8 x 1024 tokens, and GPT-2 124M's.
  for (auto [N, I, O] : {std::array<int64_t, 3>{8192, 2048, 8192}, std::array<int64_t, 3>{4096, 768, 3072}}) {
    Buf<float> y(be, N * O), b(be, O), dy(be, N * O), dx(be, N * I), dW(be, O * I), db(be, O);
    Buf<uint16_t> x(be, N * I), W(be, O * I), cast(be, N * O);
    be.fill(x.p, DType::bf16, 0.01, N * I);
    be.fill(W.p, DType::bf16, 0.02, O * I);
    be.fill(dy.p, DType::f32, 0.01, N * O);
    const double flop = 2.0 * N * I * O;
    const std::string shape = std::to_string(N) + "x" + std::to_string(I) + "x" + std::to_string(O);
    double ms = time_ms(be, 20, [&] { be.linear_forward_bf16(y.p, x.p, W.p, b.p, N, I, O); });
    g_bench.push_back({"linear_forward_bf16 " + shape, ms, flop / ms / 1e9, "TFLOP/s"});
    ms = time_ms(be, 20, [&] { be.linear_backward_bf16(dx.p, dW.p, db.p, dy.p, x.p, W.p, N, I, O, false, cast.p); });
    g_bench.push_back({"linear_backward_bf16 " + shape, ms, 2 * flop / ms / 1e9, "TFLOP/s"});
    // The MLP's GELU: in the GEMM's epilogue (fused) against the GEMM, the
    // cast to bf16 and the GELU pass the model runs without it (unfused);
    // backward: the down-projection of [N, O] -> [N, I] with the GELU
    // gradient as the op runs it (cuda: the dx GEMM, then the gradient pass:
    // DGELU with an fp32 output beside a bf16 aux is not a documented
    // cuBLASLt combination) against the two as separate calls.
    Buf<uint16_t> act(be, N * O), pre(be, N * O);
    Buf<float> dpre(be, N * O), dy2(be, N * I), dW2(be, O * I), db2(be, I);
    be.fill(dy2.p, DType::f32, 0.01, N * I);
    ms = time_ms(be, 20, [&] { be.linear_gelu_forward_bf16(act.p, pre.p, x.p, W.p, b.p, N, I, O, y.p); });
    g_bench.push_back({"mlp_gelu_forward fused " + shape, ms, flop / ms / 1e9, "TFLOP/s"});
    ms = time_ms(be, 20, [&] {
      be.linear_forward_bf16(y.p, x.p, W.p, b.p, N, I, O);
      be.cast(pre.p, DType::bf16, y.p, DType::f32, N * O);
      be.gelu_forward_bf16(act.p, pre.p, N * O);
    });
    g_bench.push_back({"mlp_gelu_forward unfused " + shape, ms, flop / ms / 1e9, "TFLOP/s"});
    ms = time_ms(be, 20, [&] {
      be.linear_backward_gelu_bf16(dpre.p, dW2.p, db2.p, dy2.p, act.p, W.p, pre.p, N, O, I, cast.p);
    });
    g_bench.push_back({"mlp_gelu_backward fused " + shape, ms, 2 * flop / ms / 1e9, "TFLOP/s"});
    ms = time_ms(be, 20, [&] {
      be.linear_backward_bf16(dpre.p, dW2.p, db2.p, dy2.p, act.p, W.p, N, O, I, false, cast.p);
      be.gelu_backward_bf16(dpre.p, pre.p, dpre.p, N * O);
    });
    g_bench.push_back({"mlp_gelu_backward unfused " + shape, ms, 2 * flop / ms / 1e9, "TFLOP/s"});
  }
  {
    const int64_t N = 8192, C = 2048;
    Buf<float> x(be, N * C), y(be, N * C), g(be, C), b(be, C), m(be, N), r(be, N), dx(be, N * C), dg(be, C), db(be, C);
    be.fill(x.p, DType::f32, 0.5, N * C);
    const double ms = time_ms(be, 50, [&] { be.layernorm_forward(y.p, m.p, r.p, x.p, g.p, b.p, N, C); });
    g_bench.push_back({"layernorm_forward 8192x2048", ms, 2.0 * N * C * 4 / ms / 1e6, "GB/s"});
    const double msb = time_ms(be, 50, [&] { be.layernorm_backward(dx.p, dg.p, db.p, y.p, x.p, g.p, m.p, r.p, N, C); });
    g_bench.push_back({"layernorm_backward 8192x2048", msb, 4.0 * N * C * 4 / msb / 1e6, "GB/s"});
  }
  // Causal flash attention forward + backward, bf16, at GPT-2 124M's and the
  // 1.3B GPT's attention shapes, 8 x 1024 tokens. FLOPs by the usual
  // convention (FlashAttention-2's): forward 4 B H T^2 hs / 2 (two products,
  // half the scores causal), backward 2.5 times the forward.
  for (auto [B, T, H, hs] : {std::array<int64_t, 4>{8, 1024, 12, 64}, std::array<int64_t, 4>{8, 1024, 16, 128}}) {
    const int64_t C = H * hs, W = 3 * C;
    Buf<uint16_t> qkv(be, B * T * W), yb(be, B * T * C);
    Buf<float> y(be, B * T * C), lse(be, B * H * T), dy(be, B * T * C), dqkv(be, B * T * W);
    be.fill(qkv.p, DType::bf16, 0.01, B * T * W);
    be.fill(yb.p, DType::bf16, 0.01, B * T * C);
    be.fill(dy.p, DType::f32, 0.01, B * T * C);
    const double fwd = 2.0 * B * H * T * T * hs;
    const std::string shape = std::to_string(B) + "x" + std::to_string(T) + "x" + std::to_string(H) + "x" + std::to_string(hs);
    const double ms = time_ms(be, 10, [&] {
      be.flash_attention_forward_bf16(y.p, lse.p, qkv.p, B, T, H, H, hs);
      be.flash_attention_backward_bf16(dqkv.p, dy.p, qkv.p, yb.p, lse.p, B, T, H, H, hs);
    });
    g_bench.push_back({"flash_attention_fwd_bwd_bf16 " + shape, ms, 3.5 * fwd / ms / 1e9, "TFLOP/s"});
  }
  {
    const int64_t n = int64_t{1} << 28;  // 268M parameters
    Buf<float> p(be, n), g(be, n), m(be, n), v(be, n);
    const AdamWSegment seg{p.p, g.p, m.p, v.p, n, 0.1f};
    const AdamWArgs a{.lr = 1e-4f, .beta1 = 0.9f, .beta2 = 0.95f, .eps = 1e-8f, .grad_scale = 1.0f, .step = 1};
    const double ms = time_ms(be, 10, [&] { be.adamw(&seg, 1, a, nullptr); });
    g_bench.push_back({"adamw 2^28 params", ms, 7.0 * n * 4 / ms / 1e6, "GB/s"});
  }
  for (const Bench& b : g_bench) std::printf("  %-44s %9.3f ms  %9.1f %s\n", b.name.c_str(), b.ms, b.rate, b.unit);
}

int run(const Backend& be, bool small, bool with_bench, const std::string& device, const char* json) {
  std::printf("device-check on %s (%s)\n", be.name, device.c_str());
  if (small) {
    check_layernorm(be, 5, 37);
    check_gelu(be, 1001);
    check_residuals(be, 3, 21);
    check_reductions(be, 100003);
    check_adamw(be, 997);
    check_cast(be, 1001);
    check_linear(be, 7, 19, 11, false);
    check_linear(be, 7, 19, 11, true);
    check_linear_gelu(be, 7, 24, 40);   // O, I multiples of 8: cuBLASLt's epilogues where it has them
    check_linear_gelu(be, 9, 19, 13);   // odd: the GELU as its own pass
    check_tile_gemm(be, 32, 48, 64);
    check_flash_bf16(be, 1, 48, 2, 1, 32);  // tile kernels
    check_flash_bf16(be, 2, 21, 2, 2, 24);  // scalar kernels
  } else {
    check_layernorm(be, 4096, 768);
    check_layernorm(be, 33, 1601);
    check_gelu(be, 4096 * 3072 + 17);
    check_residuals(be, 4096, 768);
    check_reductions(be, (int64_t{1} << 26) + 3);
    check_adamw(be, 10000019);
    check_cast(be, 1000003);
    check_linear(be, 512, 768, 2304, false);
    check_linear(be, 512, 768, 2304, true);
    check_linear(be, 77, 131, 59, true);
    check_linear_gelu(be, 256, 768, 3072);  // GPT-2's MLP
    check_linear_gelu(be, 77, 131, 59);
    check_tile_gemm(be, 512, 768, 1024);
    check_flash_bf16(be, 1, 512, 4, 4, 64);   // GPT-2's head size, tile kernels
    check_flash_bf16(be, 1, 256, 4, 2, 128);  // grouped heads of 128, tile kernels
    check_flash_bf16(be, 1, 100, 2, 1, 40);   // scalar kernels
  }
  if (with_bench) bench(be);
  int failed = 0;
  for (const Result& r : g_results) failed += r.pass ? 0 : 1;
  std::printf("device-check: %zu checks, %d failed\n", g_results.size(), failed);
  if (json != nullptr) {
    FILE* f = std::fopen(json, "w");
    if (f == nullptr) {
      std::fprintf(stderr, "device-check: cannot write %s\n", json);
      return 2;
    }
    std::fprintf(f, "{\"backend\": \"%s\", \"device\": \"%s\", \"checks\": [", be.name, device.c_str());
    for (size_t i = 0; i < g_results.size(); ++i) {
      const Result& r = g_results[i];
      std::fprintf(f, "%s\n  {\"name\": \"%s\", \"pass\": %s, \"worst_err_over_bound\": %.6g}", i ? "," : "",
                   r.name.c_str(), r.pass ? "true" : "false", std::isfinite(r.worst_ratio) ? r.worst_ratio : 1e300);
    }
    std::fprintf(f, "],\n \"bench\": [");
    for (size_t i = 0; i < g_bench.size(); ++i) {
      const Bench& b = g_bench[i];
      std::fprintf(f, "%s\n  {\"name\": \"%s\", \"ms\": %.6g, \"rate\": %.6g, \"unit\": \"%s\"}", i ? "," : "",
                   b.name.c_str(), b.ms, b.rate, b.unit);
    }
    std::fprintf(f, "]}\n");
    std::fclose(f);
  }
  return failed == 0 ? 0 : 1;
}

}  // namespace
}  // namespace tera

int main(int argc, char** argv) {
  const char* usage =
      "usage: tera-device-check BACKEND [--small] [--bench] [--status] [--warp 32|64] [--json FILE]\n"
      "  BACKEND: gpu-emu (the SIMT emulator), cuda or hip, as built into this binary\n";
  if (argc < 2) {
    std::fputs(usage, stderr);
    return 2;
  }
  const std::string backend = argv[1];
  bool small = false, with_bench = false, status_only = false;
  [[maybe_unused]] int warp = 32;
  const char* json = nullptr;
  for (int i = 2; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--small") {
      small = true;
    } else if (a == "--status") {
      status_only = true;
    } else if (a == "--bench") {
      with_bench = true;
    } else if (a == "--warp" && i + 1 < argc) {
      warp = std::atoi(argv[++i]);
    } else if (a == "--json" && i + 1 < argc) {
      json = argv[++i];
    } else {
      std::fprintf(stderr, "tera-device-check: unknown argument %s\n%s", a.c_str(), usage);
      return 2;
    }
  }
#if defined(TERA_HAVE_GPU_EMU)
  if (backend == "gpu-emu") {
    if (warp != 32 && warp != 64) {
      std::fprintf(stderr, "tera-device-check: --warp must be 32 or 64\n");
      return 2;
    }
    auto o = tera::gpu_emu_options_from_env();  // TERA_GPU_EMU_GEMM=tiles: the hip backend's GEMMs
    if (!o) {
      std::fprintf(stderr, "tera-device-check: %s\n", o.error().c_str());
      return 2;
    }
    o->warp = warp;
    const auto be = tera::make_gpu_emu_backend(*o);
    return tera::run(*be, true, false,
                     "SIMT emulator, warp " + std::to_string(warp) + (o->tile_gemms ? ", tile GEMMs" : ""), json);
  }
#endif
  std::string device = "?", unusable;
#if defined(TERA_HAVE_CUDA)
  if (backend == "cuda") device = tera::cuda_device_name(), unusable = tera::cuda_device_status();
#endif
#if defined(TERA_HAVE_HIP)
  if (backend == "hip") device = tera::hip_device_name(), unusable = tera::hip_device_status();
#endif
  if (backend == "cuda" || backend == "hip") {
    if (status_only) {  // the line the node check and gpu.cuda_status read
      if (!unusable.empty()) {
        std::printf("tera-device-check: %s: %s\n", backend.c_str(), unusable.c_str());
        return 2;
      }
      std::printf("tera-device-check: %s: ready on %s\n", backend.c_str(), device.c_str());
      return 0;
    }
    auto made = tera::make_backend(backend);
    if (!made) {
      std::fprintf(stderr, "tera-device-check: %s %s\n", backend.c_str(), made.error().c_str());
      return 2;
    }
    return tera::run(**made, small, with_bench, device, json);
  }
  std::fprintf(stderr, "tera-device-check: backend %s is not built into this binary\n%s", backend.c_str(), usage);
  return 2;
}
