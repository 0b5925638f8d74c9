// Profiling wrapper: each op forwards to the inner backend between two
// clock reads (and two synchronizations where the inner backend is
// asynchronous); each hook forwards as it is. The wrappers and the op names
// come from the one op list (TERA_BACKEND_OPS, TERA_BACKEND_HOOKS).
#include "kernels/profiling_backend.h"

#include <algorithm>
#include <array>
#include <fmt/format.h>
#include <type_traits>
#include <vector>

#include "core/check.h"
#include "core/timer.h"

namespace tera {

namespace {

struct ProfilingContext final : BackendContext {
  explicit ProfilingContext(const Backend& in) : inner(&in) {}
  const Backend* inner;
  std::array<double, kKernelOps> seconds{};
  std::array<int64_t, kKernelOps> calls{};
};

ProfilingContext& profile(BackendContext* c) { return *static_cast<ProfilingContext*>(c); }

// The timed forwarder of one op (Member of BackendOps) whose signature is Fn.
template <KernelOp Op, auto Member, typename Fn>
struct Timed;
template <KernelOp Op, auto Member, typename R, typename... A>
struct Timed<Op, Member, R (*)(BackendContext*, A...)> {
  static R call(BackendContext* c, A... a) {
    ProfilingContext& p = profile(c);
    const BackendOps& in = p.inner->ops();
    BackendContext* ic = p.inner->context();
    auto drain = [&] {
      if (in.synchronize != nullptr && Op != KernelOp::synchronize) in.synchronize(ic);
    };
    drain();  // work queued before this op is not its time
    const double t0 = now_seconds();
    auto record = [&] {
      drain();
      p.seconds[static_cast<size_t>(Op)] += now_seconds() - t0;
      ++p.calls[static_cast<size_t>(Op)];
    };
    if constexpr (std::is_void_v<R>) {
      (in.*Member)(ic, a...);
      record();
    } else {
      R r = (in.*Member)(ic, a...);
      record();
      return r;
    }
  }
};

// The forwarder of one hook.
template <auto Member, typename Fn>
struct Forwarded;
template <auto Member, typename R, typename... A>
struct Forwarded<Member, R (*)(BackendContext*, A...)> {
  static R call(BackendContext* c, A... a) {
    ProfilingContext& p = profile(c);
    return (p.inner->ops().*Member)(p.inner->context(), a...);
  }
};

ProfilingContext& counters(const Backend& profiled) {
  TERA_ASSERT(std::string(profiled.name) == "profiling", std::string("not a profiling backend: ") + profiled.name);
  return *static_cast<ProfilingContext*>(profiled.context());
}

}  // namespace

std::unique_ptr<Backend> make_profiling_backend(const Backend& inner) {
  const BackendOps& in = inner.ops();
  BackendOps w;
  // An entry the inner backend leaves null (an optional one) stays null.
#define TERA_PROFILE_OP(op, Fn, need) w.op = in.op != nullptr ? &Timed<KernelOp::op, &BackendOps::op, Fn>::call : nullptr;
  TERA_BACKEND_OPS(TERA_PROFILE_OP)
#undef TERA_PROFILE_OP
#define TERA_FORWARD_HOOK(hook, Fn) w.hook = in.hook != nullptr ? &Forwarded<&BackendOps::hook, Fn>::call : nullptr;
  TERA_BACKEND_HOOKS(TERA_FORWARD_HOOK)
#undef TERA_FORWARD_HOOK
  return std::make_unique<Backend>(inner.with_ops("profiling", w, std::make_shared<ProfilingContext>(inner)));
}

void profiling_reset(const Backend& profiled) {
  ProfilingContext& p = counters(profiled);
  p.seconds.fill(0);
  p.calls.fill(0);
}

double profiling_seconds(const Backend& profiled, const std::string& op) {
  const ProfilingContext& p = counters(profiled);
  for (int i = 0; i < kKernelOps; ++i) {
    if (op == kernel_op_name(static_cast<KernelOp>(i))) return p.seconds[static_cast<size_t>(i)];
  }
  return 0;
}

std::string profiling_report(const Backend& profiled) {
  const ProfilingContext& p = counters(profiled);
  double total = 0;
  for (double s : p.seconds) total += s;
  std::vector<int> order(kKernelOps);
  for (int i = 0; i < kKernelOps; ++i) order[static_cast<size_t>(i)] = i;
  std::sort(order.begin(), order.end(), [&](int a, int b) {
    return p.seconds[static_cast<size_t>(a)] > p.seconds[static_cast<size_t>(b)];
  });
  std::string out = fmt::format("{:<26} {:>8} {:>10} {:>7}\n", "op", "calls", "ms", "share");
  for (int i : order) {
    const auto k = static_cast<size_t>(i);
    if (p.calls[k] == 0) continue;
    out += fmt::format("{:<26} {:>8} {:>10.1f} {:>6.1f}%\n", kernel_op_name(static_cast<KernelOp>(i)), p.calls[k],
                       p.seconds[k] * 1e3, 100 * p.seconds[k] / total);
  }
  out += fmt::format("{:<26} {:>8} {:>10.1f}\n", "total in ops", "", total * 1e3);
  return out;
}

}  // namespace tera
