// The cpu-guarded backend: the CPU kernels over device memory that host code
// cannot touch. Device pointers are host addresses with bit 54 set, an
// address no process maps (x86-64 user space ends at 2^47, AArch64's at 2^48
// or 2^52, and the top-byte-ignore bits start at 56), so any host read or
// write through one faults (SIGSEGV) instead of working by accident. Every
// op takes the bit off its device pointers before calling the CPU kernel,
// and refuses a pointer without it: a host buffer handed to a kernel is as
// much a bug as a device buffer read by the host (on a GPU either crashes).
// The device communicator takes the bit off too (DeviceAddressing::
// mapped_host), so MPI moves the real memory.
#include <cstdint>
#include <string>
#include <type_traits>
#include <vector>

#include "core/check.h"
#include "kernels/backend.h"
#include "kernels/backend_registry.h"
#include "kernels/cpu/cpu_ops.h"

namespace tera {

namespace {

constexpr uintptr_t kGuardBit = uintptr_t{1} << 54;

bool is_device(const void* p) { return (reinterpret_cast<uintptr_t>(p) & kGuardBit) != 0; }

// The host address behind a device pointer (null stays null).
template <typename T>
T* host_of(T* p, const char* op) {
  if (p == nullptr) return nullptr;
  TERA_ASSERT(is_device(p), std::string("cpu-guarded: ") + op +
                                " was given a host pointer where device memory is expected (copy it to the device first)");
  return reinterpret_cast<T*>(reinterpret_cast<uintptr_t>(p) & ~kGuardBit);
}

template <typename T>
T* checked_host(T* p, const char* op) {
  TERA_ASSERT(p == nullptr || !is_device(p), std::string("cpu-guarded: ") + op +
                                                 " was given device memory where a host pointer is expected");
  return p;
}

void* to_host(const void* p) { return p == nullptr ? nullptr : host_of(const_cast<void*>(p), "the device communicator"); }

// Every pointer argument is device memory; other arguments pass as they are.
template <typename A>
A untag(A a, const char* op) {
  if constexpr (std::is_pointer_v<A>) {
    return host_of(a, op);
  } else {
    return a;
  }
}

// The cpu backend's entry of op `Op` with every pointer untagged (and checked).
template <KernelOp Op, auto Member, typename Fn>
struct Guarded;
template <KernelOp Op, auto Member, typename R, typename... A>
struct Guarded<Op, Member, R (*)(BackendContext*, A...)> {
  static R call(BackendContext*, A... a) { return (cpu_backend().ops().*Member)(nullptr, untag<A>(a, kernel_op_name(Op))...); }
};

void* guarded_alloc(BackendContext*, int64_t bytes) {
  void* p = cpu::alloc(bytes);
  if (p == nullptr) return nullptr;
  TERA_ASSERT(!is_device(p), "cpu-guarded: the host allocator returned an address with the guard bit set");
  return reinterpret_cast<void*>(reinterpret_cast<uintptr_t>(p) | kGuardBit);
}

void guarded_release(BackendContext*, void* p) { cpu::release(host_of(p, "release")); }

void guarded_fill(BackendContext*, void* dst, DType t, double value, int64_t n) { cpu::fill(host_of(dst, "fill"), t, value, n); }

void guarded_copy(BackendContext*, void* dst, const void* src, int64_t bytes, CopyKind kind) {
  switch (kind) {
    case CopyKind::host_to_device:
      cpu::copy(host_of(dst, "copy host_to_device (dst)"), checked_host(src, "copy host_to_device (src)"), bytes, kind);
      return;
    case CopyKind::device_to_host:
      cpu::copy(checked_host(dst, "copy device_to_host (dst)"), host_of(src, "copy device_to_host (src)"), bytes, kind);
      return;
    case CopyKind::device_to_device:
      cpu::copy(host_of(dst, "copy (dst)"), host_of(src, "copy (src)"), bytes, kind);
      return;
  }
}

// Segment descriptors are host arrays whose entries point to device memory.
std::vector<SegmentRef> untag_segments(const SegmentRef* segs, int64_t nsegs, const char* op) {
  std::vector<SegmentRef> out(checked_host(segs, op), checked_host(segs, op) + nsegs);
  for (SegmentRef& s : out) s.data = host_of(s.data, op);
  return out;
}

void guarded_sum_squares(BackendContext*, double* out, const SegmentRef* segs, int64_t nsegs, int64_t groups) {
  const std::vector<SegmentRef> h = untag_segments(segs, nsegs, "sum_squares");
  cpu::sum_squares_segments(host_of(out, "sum_squares"), h.data(), nsegs, groups);
}

void guarded_count_nonfinite(BackendContext*, double* out, const SegmentRef* segs, int64_t nsegs, int64_t groups) {
  const std::vector<SegmentRef> h = untag_segments(segs, nsegs, "count_nonfinite");
  cpu::count_nonfinite_segments(host_of(out, "count_nonfinite"), h.data(), nsegs, groups);
}

void guarded_adamw(BackendContext*, const AdamWSegment* segs, int64_t nsegs, const AdamWArgs& a, double* nonfinite) {
  std::vector<AdamWSegment> h(checked_host(segs, "adamw"), checked_host(segs, "adamw") + nsegs);
  for (AdamWSegment& s : h) {
    s.param = host_of(s.param, "adamw");
    s.grad = host_of(s.grad, "adamw");
    s.m = host_of(s.m, "adamw");
    s.v = host_of(s.v, "adamw");
    s.param_bf16 = host_of(s.param_bf16, "adamw");
  }
  cpu::adamw_segments(h.data(), nsegs, a, host_of(nonfinite, "adamw"));
}


}  // namespace

std::unique_ptr<Backend> make_cpu_guarded_backend() {
  const Backend& cpu = cpu_backend();
  BackendOps b;
  // The model's ops: the CPU kernels with every pointer untagged (and checked).
#define TERA_GUARD_OP(op, Fn, need) \
  if (cpu.ops().op != nullptr) b.op = &Guarded<KernelOp::op, &BackendOps::op, Fn>::call;
  TERA_BACKEND_OPS(TERA_GUARD_OP)
#undef TERA_GUARD_OP
  // Memory, and the entries whose arguments mix host and device memory.
  b.alloc = guarded_alloc;
  b.release = guarded_release;
  b.fill = guarded_fill;
  b.copy = guarded_copy;
  b.sum_squares = guarded_sum_squares;
  b.count_nonfinite = guarded_count_nonfinite;
  b.adamw = guarded_adamw;
  b.gemm_bf16_path = cpu.ops().gemm_bf16_path;
  b.supports = cpu.ops().supports;
  return std::make_unique<Backend>("cpu-guarded", cpu.gemm_library,
                                   DeviceAddressing{DeviceAddressing::Kind::mapped_host, to_host}, b, nullptr);
}

}  // namespace tera
