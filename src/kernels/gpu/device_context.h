// What every launch of the kernel dialect needs of its backend: the
// DeviceContext (the stream, scratch memory, the warp width), the adapter
// from an op written over it to an ops.h table entry, and the launch grid
// helpers, and the fill and cast every family uses. ops_launch.h and the
// per-family launch headers build on it.
#pragma once

#include <cmath>
#include <cstdint>

#include "kernels/backend.h"
#include "kernels/gpu/dialect.h"
#include "kernels/gpu/kernels/elementwise.cuh"
#include "kernels/ops.h"

TERA_GPU_BEGIN

// What every launch needs of the backend instance; each GPU backend's
// context derives from it.
class DeviceContext : public BackendContext {
 public:
  Stream stream{};        // where launches go, in order
  int warp = kWarpSize;   // the warp width kernels are launched for (gpu-emu: a setting)
  // Device memory for partial results, valid until the next call (launches
  // are ordered on the stream, so the next op's work runs after this one's).
  virtual void* scratch(int64_t bytes) = 0;
  // Called after every launch with the kernel's name (cuda: checks the
  // launch and, in the synchronous debug mode, waits for it).
  virtual void launched(const char* kernel) {}
};

// A table entry from an op written over a DeviceContext.
template <auto F>
struct DeviceEntry;
template <typename R, typename... A, R (*F)(DeviceContext&, A...)>
struct DeviceEntry<F> {
  static R call(BackendContext* c, A... a) { return F(*static_cast<DeviceContext*>(c), a...); }
};
template <auto F>
constexpr auto on_device = &DeviceEntry<F>::call;

namespace launch {

constexpr int kThreads = 256;

// Launch grids (a function, not braces: a brace list's comma splits a macro argument).
inline Dim grid_x(unsigned x) { return Dim{x, 1}; }
inline Dim grid_xy(unsigned x, unsigned y) { return Dim{x, y}; }

// Blocks for a grid-stride loop over n elements (at least 1, at most 4096).
inline unsigned blocks_for(int64_t n) {
  const int64_t b = (n + kThreads - 1) / kThreads;
  return static_cast<unsigned>(b < 1 ? 1 : (b > 4096 ? 4096 : b));
}

// false for a non-zero f16 value (no tensor of tera's is f16).
inline bool fill(DeviceContext& c, void* dst, DType t, double value, int64_t n) {
  if (n <= 0) return true;
  if (t == DType::u8 || (value == 0.0 && !std::signbit(value))) {  // every dtype's zero is all-zero bytes
    const int64_t bytes = t == DType::u8 ? n : n * dtype_bytes(t);
    TERA_LAUNCH(c, fill_u8_k, grid_x(blocks_for(bytes)), kThreads, 0, static_cast<uint8_t*>(dst),
                static_cast<uint8_t>(value), bytes);
    return true;
  }
  const Dim g{blocks_for(n), 1};
  switch (t) {
    case DType::f32: TERA_LAUNCH(c, fill_f32_k, g, kThreads, 0, static_cast<float*>(dst), static_cast<float>(value), n); return true;
    case DType::f64: TERA_LAUNCH(c, fill_f64_k, g, kThreads, 0, static_cast<double*>(dst), value, n); return true;
    case DType::bf16:
      TERA_LAUNCH(c, fill_u16_k, g, kThreads, 0, static_cast<uint16_t*>(dst), float_to_bf16(static_cast<float>(value)), n);
      return true;
    case DType::i32:
      TERA_LAUNCH(c, fill_i32_k, g, kThreads, 0, static_cast<int32_t*>(dst), static_cast<int32_t>(value), n);
      return true;
    default: return false;
  }
}

// f32 <-> bf16 (nearest even), f32 <-> f64; false for any other pair.
inline bool cast(DeviceContext& c, void* dst, DType dst_t, const void* src, DType src_t, int64_t n) {
  if (n <= 0) return true;
  const Dim g{blocks_for(n), 1};
  if (dst_t == DType::bf16 && src_t == DType::f32) {
    TERA_LAUNCH(c, cast_f32_bf16_k, g, kThreads, 0, static_cast<uint16_t*>(dst), static_cast<const float*>(src), n);
  } else if (dst_t == DType::f32 && src_t == DType::bf16) {
    TERA_LAUNCH(c, cast_bf16_f32_k, g, kThreads, 0, static_cast<float*>(dst), static_cast<const uint16_t*>(src), n);
  } else if (dst_t == DType::f64 && src_t == DType::f32) {
    TERA_LAUNCH(c, cast_f32_f64_k, g, kThreads, 0, static_cast<double*>(dst), static_cast<const float*>(src), n);
  } else if (dst_t == DType::f32 && src_t == DType::f64) {
    TERA_LAUNCH(c, cast_f64_f32_k, g, kThreads, 0, static_cast<float*>(dst), static_cast<const double*>(src), n);
  } else {
    return false;
  }
  return true;
}

}  // namespace launch
TERA_GPU_END
