// The kernel dialect: the small portability layer every GPU kernel of tera is
// written against, so that one source compiles with three compilers:
//
//   nvcc   (CUDA, sm_90 and sm_80)       TERA_GPU_CUDA   warp 32
//   hipcc  (HIP 5.2, gfx90a / MI250X)    TERA_GPU_HIP    warp 64
//   g++    (the gpu-emu SIMT emulator)   TERA_GPU_EMU    warp 32 or 64 (a setting)
//
// What a kernel may use, and nothing else of CUDA or HIP:
//   TERA_KERNEL                 a kernel entry (__global__ void)
//   TERA_DEVICE                 a device helper function
//   thread_x() block_x() block_y() block_dim_x() grid_dim_x() grid_dim_y()
//   block_sync()                __syncthreads
//   warp_size()                 32 on NVIDIA, 64 on AMD, the setting on gpu-emu
//   lane_id() warp_id()
//   shfl_xor(v, m)              a full-warp butterfly exchange (float, double, int)
//   warp_sum(v) warp_max(v)     full-warp reductions built on shfl_xor
//   TERA_SHARED(T, name, n)     a block's shared array T name[n], 32-byte aligned
//   warp_sync()                 __syncwarp: the warp's lanes meet (shared-memory order)
//   mma_16x16x16_bf16(...)      the tile multiply-accumulate (kernels/gpu/mma.h)
//   bf16_to_float, float_to_bf16   bf16 kept as uint16_t (the upper half of
//                               an fp32 pattern), rounded to nearest even
//   TERA_LAUNCH(ctx, kernel, grid, block, shared_bytes, args...)
//                               queued on ctx.stream (a DeviceContext,
//                               ops_launch.h); returns before it runs
//
// Rules the emulator enforces (and a GPU silently breaks on): every thread of
// a block reaches every block_sync, the same one; every lane of a warp reaches
// every shfl_xor; blocks use whole warps when they exchange within warps.
#pragma once

#include <cstdint>

#if defined(__HIP__) || defined(__HIPCC__)
#define TERA_GPU_HIP 1
#elif defined(__CUDACC__)
#define TERA_GPU_CUDA 1
#else
#define TERA_GPU_EMU 1
#endif

// Every name of the dialect, the kernels and the launch wrappers lives in an
// inline namespace per compiler target, so the cuda backend and gpu-emu link
// into one binary without their kernels' symbols colliding.
#if defined(TERA_GPU_CUDA)
#define TERA_GPU_TARGET on_cuda
#elif defined(TERA_GPU_HIP)
#define TERA_GPU_TARGET on_hip
#else
#define TERA_GPU_TARGET on_emu
#endif
#define TERA_GPU_BEGIN \
  namespace tera::gpu {  \
  inline namespace TERA_GPU_TARGET {
#define TERA_GPU_END \
  }                  \
  }

// --------------------------------------------------------------------------
#if defined(TERA_GPU_CUDA) || defined(TERA_GPU_HIP)

#include <cstring>

#if defined(TERA_GPU_CUDA)
#include <cuda_runtime.h>
#else
#include <hip/hip_runtime.h>
#endif

#define TERA_KERNEL __global__ void
#define TERA_DEVICE __device__ __forceinline__
#define TERA_HOST_DEVICE __host__ __device__ inline
#define TERA_SHARED(T, name, n) alignas(32) __shared__ T name[n]

TERA_GPU_BEGIN

#if defined(TERA_GPU_CUDA)
using Stream = cudaStream_t;
constexpr int kWarpSize = 32;
#else
using Stream = hipStream_t;
constexpr int kWarpSize = 64;  // gfx90a runs wave64
#endif

struct Dim {
  unsigned x = 1, y = 1;
  operator dim3() const { return dim3(x, y, 1); }
};

TERA_DEVICE int warp_size() { return kWarpSize; }
TERA_DEVICE int thread_x() { return static_cast<int>(threadIdx.x); }
TERA_DEVICE int block_x() { return static_cast<int>(blockIdx.x); }
TERA_DEVICE int block_y() { return static_cast<int>(blockIdx.y); }
TERA_DEVICE int block_dim_x() { return static_cast<int>(blockDim.x); }
TERA_DEVICE int grid_dim_x() { return static_cast<int>(gridDim.x); }
TERA_DEVICE int grid_dim_y() { return static_cast<int>(gridDim.y); }
TERA_DEVICE void block_sync() { __syncthreads(); }
#if defined(TERA_GPU_CUDA)
TERA_DEVICE void warp_sync() { __syncwarp(); }
#else
TERA_DEVICE void warp_sync() { __builtin_amdgcn_wave_barrier(); }  // a wave runs in lockstep; this orders it
#endif

#if defined(TERA_GPU_CUDA)
TERA_DEVICE float shfl_xor(float v, int m) { return __shfl_xor_sync(0xffffffffu, v, m); }
TERA_DEVICE double shfl_xor(double v, int m) { return __shfl_xor_sync(0xffffffffu, v, m); }
TERA_DEVICE int shfl_xor(int v, int m) { return __shfl_xor_sync(0xffffffffu, v, m); }
#else
// HIP 5.2 has no _sync variants: a wave always exchanges as a whole.
TERA_DEVICE float shfl_xor(float v, int m) { return __shfl_xor(v, m); }
TERA_DEVICE double shfl_xor(double v, int m) { return __shfl_xor(v, m); }
TERA_DEVICE int shfl_xor(int v, int m) { return __shfl_xor(v, m); }
#endif
// Bit patterns, on the host as well (the backends round fill values).
__host__ __device__ inline uint32_t float_bits(float f) {
  uint32_t u;
  memcpy(&u, &f, sizeof u);
  return u;
}
__host__ __device__ inline float bits_float(uint32_t u) {
  float f;
  memcpy(&f, &u, sizeof f);
  return f;
}

TERA_GPU_END

// Every launch is checked (ctx.launched: a bad grid or a missing kernel
// image is an error at once, not stale buffers later).
#define TERA_LAUNCH(ctx, kernel, grid, block, shared_bytes, ...)                                     \
  do {                                                                                             \
    kernel<<<static_cast<dim3>(grid), static_cast<dim3>(block), (shared_bytes), (ctx).stream>>>(   \
        __VA_ARGS__);                                                                              \
    (ctx).launched(#kernel);                                                                       \
  } while (0)

// --------------------------------------------------------------------------
#else  // TERA_GPU_EMU: every thread is a fiber of the emulator (emu/emulator.h)

#include <cmath>

#include "kernels/gpu/emu/emulator.h"

#define TERA_KERNEL void
#define TERA_DEVICE inline
#define TERA_HOST_DEVICE inline
#define TERA_SHARED(T, name, n)                                                             \
  static const char name##_site_ = 0;                                                       \
  T* name = static_cast<T*>(::tera::gpu::emu::shared(&name##_site_, sizeof(T) * (n), 32))

TERA_GPU_BEGIN

using emu::Dim;
using std::isfinite;
using Stream = emu::Stream*;
constexpr int kWarpSize = 32;  // a context's default; gpu-emu's warp width is a setting (64: AMD's)
inline int warp_size() { return emu::warp_size(); }
inline int thread_x() { return emu::self().thread; }
inline int block_x() { return emu::self().block_x; }
inline int block_y() { return emu::self().block_y; }
inline int block_dim_x() { return emu::self().block_dim; }
inline int grid_dim_x() { return static_cast<int>(emu::self().grid.x); }
inline int grid_dim_y() { return static_cast<int>(emu::self().grid.y); }
// The call site's file and line name the barrier or shuffle in reports.
inline void block_sync(const char* file = __builtin_FILE(), unsigned line = __builtin_LINE()) {
  emu::barrier({file, line});
}
// Every lane of the warp meets here (a shuffle's rendezvous, no data).
inline void warp_sync(const char* file = __builtin_FILE(), unsigned line = __builtin_LINE()) {
  (void)emu::shfl_xor_bits(0, 1, {file, line});
}
inline float shfl_xor(float v, int m, const char* file = __builtin_FILE(), unsigned line = __builtin_LINE()) {
  return emu::shfl_xor(v, m, {file, line});
}
inline double shfl_xor(double v, int m, const char* file = __builtin_FILE(), unsigned line = __builtin_LINE()) {
  return emu::shfl_xor(v, m, {file, line});
}
inline int shfl_xor(int v, int m, const char* file = __builtin_FILE(), unsigned line = __builtin_LINE()) {
  return emu::shfl_xor(v, m, {file, line});
}
inline uint32_t float_bits(float f) { return std::bit_cast<uint32_t>(f); }
inline float bits_float(uint32_t u) { return std::bit_cast<float>(u); }

TERA_GPU_END

#define TERA_LAUNCH(ctx, kernel, grid, block, shared_bytes, ...) \
  ::tera::gpu::emu::launch((ctx).stream, #kernel, (grid), (block), (shared_bytes), kernel, __VA_ARGS__)

#endif

// --------------------------------------------------------------------------
// Built on the primitives above, the same for every compiler.
TERA_GPU_BEGIN

TERA_DEVICE int lane_id() { return thread_x() % warp_size(); }
TERA_DEVICE int warp_id() { return thread_x() / warp_size(); }

template <typename T>
TERA_DEVICE T warp_sum(T v) {
  for (int m = warp_size() / 2; m > 0; m /= 2) v += shfl_xor(v, m);
  return v;  // every lane holds the sum, added in the same butterfly order
}
template <typename T>
TERA_DEVICE T warp_max(T v) {
  for (int m = warp_size() / 2; m > 0; m /= 2) {
    const T o = shfl_xor(v, m);
    v = o > v ? o : v;
  }
  return v;
}

// The sum over the block of every thread's v, returned to every thread; a
// fixed tree (warp butterflies, then warp 0 over the warp partials), so the
// result does not depend on scheduling. scratch: >= block_dim_x() /
// warp_size() entries of shared memory. Needs whole warps.
template <typename T>
TERA_DEVICE T block_sum(T v, T* scratch) {
  v = warp_sum(v);
  const int warps = block_dim_x() / warp_size();
  if (lane_id() == 0) scratch[warp_id()] = v;
  block_sync();
  T total = T(0);
  if (warp_id() == 0) {
    total = lane_id() < warps ? scratch[lane_id()] : T(0);
    total = warp_sum(total);
    if (lane_id() == 0) scratch[0] = total;
  }
  block_sync();
  total = scratch[0];
  block_sync();  // scratch may be reused by the caller's next reduction
  return total;
}

// The maximum over the block, returned to every thread (as block_sum).
template <typename T>
TERA_DEVICE T block_max(T v, T* scratch) {
  v = warp_max(v);
  const int warps = block_dim_x() / warp_size();
  if (lane_id() == 0) scratch[warp_id()] = v;
  block_sync();
  if (warp_id() == 0) {
    T m = lane_id() < warps ? scratch[lane_id()] : scratch[0];
    m = warp_max(m);
    if (lane_id() == 0) scratch[0] = m;
  }
  block_sync();
  const T m = scratch[0];
  block_sync();
  return m;
}

// bf16 storage: the upper 16 bits of an fp32 pattern.
TERA_HOST_DEVICE float bf16_to_float(uint16_t h) { return bits_float(static_cast<uint32_t>(h) << 16); }
// Round to nearest even; NaN stays a (quiet) NaN.
TERA_HOST_DEVICE uint16_t float_to_bf16(float f) {
  const uint32_t u = float_bits(f);
  if ((u & 0x7fffffffu) > 0x7f800000u) return static_cast<uint16_t>((u >> 16) | 0x40u);
  return static_cast<uint16_t>((u + 0x7fffu + ((u >> 16) & 1u)) >> 16);
}
// An element of fp32 or bf16 storage as fp32, and fp32 stored into either:
// lets one elementwise kernel body serve both.
TERA_DEVICE float load_f32(const float* p, int64_t i) { return p[i]; }
TERA_DEVICE float load_f32(const uint16_t* p, int64_t i) { return bf16_to_float(p[i]); }
TERA_DEVICE void store_f32(float* p, int64_t i, float v) { p[i] = v; }
TERA_DEVICE void store_f32(uint16_t* p, int64_t i, float v) { p[i] = float_to_bf16(v); }

TERA_GPU_END
