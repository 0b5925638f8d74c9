// Profiling wrapper: each entry forwards to the inner backend between two
// clock reads. The wrappers and the op names come from the one op list
// (TERA_BACKEND_OPS, backend.h).
#include "kernels/profiling_backend.h"

#include <algorithm>
#include <array>
#include <fmt/format.h>
#include <type_traits>
#include <vector>

#include "core/timer.h"

namespace tera {

namespace {

struct Counters {
  std::array<double, kKernelOps> seconds{};
  std::array<int64_t, kKernelOps> calls{};
};
Counters g_counters;
const Backend* g_inner = nullptr;

// The timed forwarder of one Backend field (Member) whose signature is Fn.
template <KernelOp Op, auto Member, typename Fn>
struct Timed;
template <KernelOp Op, auto Member, typename R, typename... A>
struct Timed<Op, Member, R (*)(A...)> {
  static R call(A... a) {
    const double t0 = now_seconds();
    auto record = [t0] {
      g_counters.seconds[static_cast<size_t>(Op)] += now_seconds() - t0;
      ++g_counters.calls[static_cast<size_t>(Op)];
    };
    if constexpr (std::is_void_v<R>) {
      (g_inner->*Member)(a...);
      record();
    } else {
      R r = (g_inner->*Member)(a...);
      record();
      return r;
    }
  }
};

Backend make_wrapped(const Backend& inner) {
  Backend w;
  w.name = "profiling";
  w.gemm_library = inner.gemm_library;
  w.gemm_bf16_path = inner.gemm_bf16_path;
  w.addressing = inner.addressing;
  // An op the inner backend leaves null (an optional one) stays null.
#define TERA_PROFILE_OP(op, Fn, need) \
  w.op = inner.op != nullptr ? &Timed<KernelOp::op, &Backend::op, Fn>::call : nullptr;
  TERA_BACKEND_OPS(TERA_PROFILE_OP)
#undef TERA_PROFILE_OP
  w.supports = inner.supports;
  return w;
}

}  // namespace

const Backend& profiling_backend(const Backend& inner) {
  g_inner = &inner;
  static const Backend wrapped = make_wrapped(inner);
  return wrapped;
}

void profiling_reset() { g_counters = Counters{}; }

double profiling_seconds(const std::string& op) {
  for (int i = 0; i < kKernelOps; ++i) {
    if (op == kernel_op_name(static_cast<KernelOp>(i))) return g_counters.seconds[static_cast<size_t>(i)];
  }
  return 0;
}

std::string profiling_report() {
  double total = 0;
  for (double s : g_counters.seconds) total += s;
  std::vector<int> order(kKernelOps);
  for (int i = 0; i < kKernelOps; ++i) order[static_cast<size_t>(i)] = i;
  std::sort(order.begin(), order.end(), [](int a, int b) {
    return g_counters.seconds[static_cast<size_t>(a)] > g_counters.seconds[static_cast<size_t>(b)];
  });
  std::string out = fmt::format("{:<26} {:>8} {:>10} {:>7}\n", "op", "calls", "ms", "share");
  for (int i : order) {
    const auto k = static_cast<size_t>(i);
    if (g_counters.calls[k] == 0) continue;
    out += fmt::format("{:<26} {:>8} {:>10.1f} {:>6.1f}%\n", kernel_op_name(static_cast<KernelOp>(i)),
                       g_counters.calls[k], g_counters.seconds[k] * 1e3, 100 * g_counters.seconds[k] / total);
  }
  out += fmt::format("{:<26} {:>8} {:>10.1f}\n", "total in ops", "", total * 1e3);
  return out;
}

}  // namespace tera
