// Profiling wrapper: each entry forwards to the inner backend between two clock reads.
#include "kernels/profiling_backend.h"

#include <algorithm>
#include <array>
#include <fmt/format.h>
#include <vector>

#include "core/timer.h"

namespace tera {

namespace {

enum Slot { kGemm, kLinFwd, kLinBwd, kLnFwd, kLnBwd, kGeluFwd, kGeluBwd, kAttnFwd, kAttnBwd, kResidual, kXent,
            kSoftmax, kEmbFwd, kEmbBwd, kPosFwd, kPosBwd, kBiasRes, kCeMax, kCeExp, kCeFin, kAdamW, kSumSq, kSlots };
constexpr std::array<const char*, kSlots> kNames = {
    "gemm", "linear_forward", "linear_backward", "layernorm_forward", "layernorm_backward", "gelu_forward",
    "gelu_backward", "attention_forward", "attention_backward", "residual_forward", "cross_entropy",
    "softmax_row", "embedding_lookup", "embedding_lookup_backward", "position_add", "position_add_backward",
    "bias_residual", "ce_max", "ce_exp_sum", "ce_finalize", "adamw", "sum_squares"};

struct Counters {
  std::array<double, kSlots> seconds{};
  std::array<int64_t, kSlots> calls{};
};
Counters g_counters;
const Backend* g_inner = nullptr;

template <Slot S, typename F, typename... A>
auto timed(F f, A&&... a) {
  const double t0 = now_seconds();
  if constexpr (std::is_void_v<decltype(f(std::forward<A>(a)...))>) {
    f(std::forward<A>(a)...);
    g_counters.seconds[S] += now_seconds() - t0;
    ++g_counters.calls[S];
  } else {
    auto r = f(std::forward<A>(a)...);
    g_counters.seconds[S] += now_seconds() - t0;
    ++g_counters.calls[S];
    return r;
  }
}

}  // namespace

const Backend& profiling_backend(const Backend& inner) {
  g_inner = &inner;
  static const Backend wrapped = {
      .name = "profiling",
      .gemm_library = inner.gemm_library,
      .gemm = [](bool ta, bool tb, int64_t M, int64_t N, int64_t K, float al, const float* A, int64_t lda,
                 const float* B, int64_t ldb, float be, float* C, int64_t ldc) {
        timed<kGemm>(g_inner->gemm, ta, tb, M, N, K, al, A, lda, B, ldb, be, C, ldc);
      },
      .linear_forward = [](float* y, const float* x, const float* W, const float* b, int64_t N, int64_t I, int64_t O) {
        timed<kLinFwd>(g_inner->linear_forward, y, x, W, b, N, I, O);
      },
      .linear_backward = [](float* dx, float* dW, float* db, const float* dy, const float* x, const float* W, int64_t N,
                            int64_t I, int64_t O) { timed<kLinBwd>(g_inner->linear_backward, dx, dW, db, dy, x, W, N, I, O); },
      .layernorm_forward = [](float* o, float* m, float* r, const float* x, const float* g, const float* b, int64_t N,
                              int64_t C) { timed<kLnFwd>(g_inner->layernorm_forward, o, m, r, x, g, b, N, C); },
      .layernorm_backward = [](float* dx, float* dg, float* db, const float* dy, const float* x, const float* g,
                               const float* m, const float* r, int64_t N, int64_t C) {
        timed<kLnBwd>(g_inner->layernorm_backward, dx, dg, db, dy, x, g, m, r, N, C);
      },
      .gelu_forward = [](float* o, const float* x, int64_t n) { timed<kGeluFwd>(g_inner->gelu_forward, o, x, n); },
      .gelu_backward = [](float* dx, const float* x, const float* dy, int64_t n) {
        timed<kGeluBwd>(g_inner->gelu_backward, dx, x, dy, n);
      },
      .attention_forward = [](float* o, float* p, const float* qkv, int64_t B, int64_t T, int64_t C, int64_t H) {
        timed<kAttnFwd>(g_inner->attention_forward, o, p, qkv, B, T, C, H);
      },
      .attention_backward = [](float* d, const float* dy, const float* qkv, const float* p, int64_t B, int64_t T,
                               int64_t C, int64_t H) { timed<kAttnBwd>(g_inner->attention_backward, d, dy, qkv, p, B, T, C, H); },
      .residual_forward = [](float* o, const float* a, const float* b, int64_t n) {
        timed<kResidual>(g_inner->residual_forward, o, a, b, n);
      },
      .cross_entropy = [](float* l, float* lg, const int32_t* t, int64_t N, int64_t V, int64_t Vp, float d) {
        timed<kXent>(g_inner->cross_entropy, l, lg, t, N, V, Vp, d);
      },
      .softmax_row = [](float* p, const float* l, int64_t V, float t) { timed<kSoftmax>(g_inner->softmax_row, p, l, V, t); },
      .embedding_lookup = [](float* o, const int32_t* tok, const float* wte, int64_t v0, int64_t v1, int64_t N,
                             int64_t C) { timed<kEmbFwd>(g_inner->embedding_lookup, o, tok, wte, v0, v1, N, C); },
      .embedding_lookup_backward = [](float* dwte, const float* d, const int32_t* tok, int64_t v0, int64_t v1,
                                      int64_t N, int64_t C) {
        timed<kEmbBwd>(g_inner->embedding_lookup_backward, dwte, d, tok, v0, v1, N, C);
      },
      .position_add = [](float* o, const float* wpe, int64_t n0, int64_t N, int64_t T, int64_t C) {
        timed<kPosFwd>(g_inner->position_add, o, wpe, n0, N, T, C);
      },
      .position_add_backward = [](float* dwpe, const float* d, int64_t n0, int64_t N, int64_t T, int64_t C) {
        timed<kPosBwd>(g_inner->position_add_backward, dwpe, d, n0, N, T, C);
      },
      .bias_residual = [](float* o, const float* a, const float* b, const float* r, int64_t N, int64_t C) {
        timed<kBiasRes>(g_inner->bias_residual, o, a, b, r, N, C);
      },
      .ce_max = [](float* m, const float* l, int64_t N, int64_t valid, int64_t ld) {
        timed<kCeMax>(g_inner->ce_max, m, l, N, valid, ld);
      },
      .ce_exp_sum = [](float* s, float* ly, float* l, const int32_t* t, const float* m, int64_t N, int64_t valid,
                       int64_t ld, int64_t v0) { timed<kCeExp>(g_inner->ce_exp_sum, s, ly, l, t, m, N, valid, ld, v0); },
      .ce_finalize = [](float* loss, float* l, const int32_t* t, const float* m, const float* s, const float* ly,
                        int64_t N, int64_t valid, int64_t ld, int64_t v0, float d) {
        timed<kCeFin>(g_inner->ce_finalize, loss, l, t, m, s, ly, N, valid, ld, v0, d);
      },
      .adamw = [](float* p, const float* g, float* m, float* v, int64_t n, const AdamWArgs& a) {
        timed<kAdamW>(g_inner->adamw, p, g, m, v, n, a);
      },
      .sum_squares = [](const float* x, int64_t n) { return timed<kSumSq>(g_inner->sum_squares, x, n); },
      .supports = inner.supports,
  };
  return wrapped;
}

void profiling_reset() { g_counters = Counters{}; }

double profiling_seconds(const std::string& op) {
  for (size_t i = 0; i < kNames.size(); ++i) {
    if (op == kNames[i]) return g_counters.seconds[i];
  }
  return 0;
}

std::string profiling_report() {
  double total = 0;
  for (double s : g_counters.seconds) total += s;
  std::vector<int> order(kSlots);
  for (int i = 0; i < kSlots; ++i) order[static_cast<size_t>(i)] = i;
  std::sort(order.begin(), order.end(), [](int a, int b) { return g_counters.seconds[a] > g_counters.seconds[b]; });
  std::string out = fmt::format("{:<20} {:>8} {:>10} {:>7}\n", "op", "calls", "ms", "share");
  for (int i : order) {
    if (g_counters.calls[i] == 0) continue;
    out += fmt::format("{:<20} {:>8} {:>10.1f} {:>6.1f}%\n", kNames[static_cast<size_t>(i)], g_counters.calls[i],
                       g_counters.seconds[i] * 1e3, 100 * g_counters.seconds[i] / total);
  }
  out += fmt::format("{:<20} {:>8} {:>10.1f}\n", "total in ops", "", total * 1e3);
  return out;
}

}  // namespace tera
