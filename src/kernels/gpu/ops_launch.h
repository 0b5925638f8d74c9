// The ops.h entries of the GPU backends, written once as launches of the
// kernel dialect: the cuda backend (nvcc), the HIP compile check (hipcc) and
// gpu-emu (g++) include this in one translation unit each. Every entry takes
// the backend's DeviceContext first (below): the stream its launches go to,
// its scratch memory, its warp width. Every pointer an entry receives is
// device memory; segment lists (SumSquaresFn, AdamWFn) are host arrays of
// device pointers, read when the entry is called: sums of squares launch per
// segment, AdamW per batch of up to kAdamWBatch segments (adamw.cuh).
//
// Every op of ops.h but the GEMMs (library calls: cuBLASLt on cuda, a host
// GEMM on gpu-emu) is written here.
#pragma once

#include <cmath>

#include "core/check.h"
#include "kernels/gpu/dialect.h"
#include "kernels/gpu/kernels/adamw.cuh"
#include "kernels/gpu/kernels/attention.cuh"
#include "kernels/gpu/kernels/flash_attention_tc.cuh"
#include "kernels/gpu/kernels/flash_attention_block.cuh"
#include "kernels/gpu/kernels/cross_entropy.cuh"
#include "kernels/gpu/kernels/elementwise.cuh"
#include "kernels/gpu/kernels/embedding.cuh"
#include "kernels/gpu/kernels/gemm.cuh"
#include "kernels/gpu/kernels/layernorm.cuh"
#include "kernels/gpu/kernels/llama.cuh"
#include "kernels/gpu/kernels/reduce.cuh"
#include "kernels/gpu/kernels/tile_gemm.cuh"
#include "kernels/backend.h"
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

inline void gelu_forward(DeviceContext& c, float* out, const float* x, int64_t n) {
  if (n > 0) TERA_LAUNCH(c, gelu_forward_k, grid_x(blocks_for(n)), kThreads, 0, out, x, n);
}
inline void gelu_backward(DeviceContext& c, float* dx, const float* x, const float* dout, int64_t n) {
  if (n > 0) TERA_LAUNCH(c, gelu_backward_k, grid_x(blocks_for(n)), kThreads, 0, dx, x, dout, n);
}
inline void gelu_forward_bf16(DeviceContext& c, uint16_t* out, const uint16_t* x, int64_t n) {
  if (n > 0) TERA_LAUNCH(c, gelu_forward_bf16_k, grid_x(blocks_for(n)), kThreads, 0, out, x, n);
}
inline void gelu_backward_bf16(DeviceContext& c, float* dx, const uint16_t* x, const float* dout, int64_t n) {
  if (n > 0) TERA_LAUNCH(c, gelu_backward_bf16_k, grid_x(blocks_for(n)), kThreads, 0, dx, x, dout, n);
}
inline void gelu_split_bf16(DeviceContext& c, uint16_t* act, uint16_t* pre, const float* y, int64_t n) {
  if (n > 0) TERA_LAUNCH(c, gelu_split_bf16_k, grid_x(blocks_for(n)), kThreads, 0, act, pre, y, n);
}

// The MLP's fused ops (ops.h) as a backend's bf16 linear op and a GELU pass:
// gpu-emu's form. The cuda backend falls back to the same passes where
// cuBLASLt refuses the epilogue (the forward through this one, the backward
// inside its own linear backward).
inline void linear_gelu_forward_bf16_passes(DeviceContext& c, LinearForwardBf16Fn linear, uint16_t* act, uint16_t* pre,
                                            const uint16_t* x, const uint16_t* W, const float* b, int64_t N,
                                            int64_t I, int64_t O, float* work) {
  linear(&c, work, x, W, b, N, I, O);  // y[N,O] fp32, bias added
  gelu_split_bf16(c, act, pre, work, N * O);
}
inline void linear_backward_gelu_bf16_passes(DeviceContext& c, LinearBackwardBf16Fn linear, float* dpre, float* dW, float* db,
                                             const float* dy, const uint16_t* x, const uint16_t* W,
                                             const uint16_t* pre, int64_t N, int64_t I, int64_t O, uint16_t* cast) {
  linear(&c, dpre, dW, db, dy, x, W, N, I, O, false, cast);  // dpre = d(act), then times gelu'(pre) in place
  gelu_backward_bf16(c, dpre, pre, dpre, N * I);
}

inline void residual_forward(DeviceContext& c, float* out, const float* a, const float* b, int64_t n) {
  if (n > 0) TERA_LAUNCH(c, residual_forward_k, grid_x(blocks_for(n)), kThreads, 0, out, a, b, n);
}
inline void bias_residual(DeviceContext& c, float* out, const float* a, const float* bias, const float* residual, int64_t N, int64_t C) {
  if (N * C > 0) TERA_LAUNCH(c, bias_residual_k, grid_x(blocks_for(N * C)), kThreads, 0, out, a, bias, residual, N, C);
}

// db[O] += the column sums of dy[N,O] (the linear layers' bias gradient):
// chunk partials, then their sum (elementwise.cuh), one pass for one chunk.
inline void column_sums(DeviceContext& c, float* db, const float* dy, int64_t N, int64_t O) {
  if (O <= 0) return;
  const unsigned cblocks = static_cast<unsigned>((O + kThreads - 1) / kThreads);
  const int64_t chunks = (N + kColumnRowsPerChunk - 1) / kColumnRowsPerChunk;
  if (chunks <= 1) {
    TERA_LAUNCH(c, column_sums_k, grid_x(cblocks), kThreads, 0, db, dy, N, O);
    return;
  }
  auto* part = static_cast<float*>(c.scratch(chunks * O * static_cast<int64_t>(sizeof(float))));
  TERA_LAUNCH(c, column_partials_k, grid_xy(cblocks, static_cast<unsigned>(chunks)), kThreads, 0, part, dy, N, O);
  TERA_LAUNCH(c, column_sums_k, grid_x(cblocks), kThreads, 0, db, static_cast<const float*>(part), chunks, O);
}

inline void layernorm_forward(DeviceContext& c, float* out, float* mean, float* rstd, const float* x, const float* g, const float* b,
                              int64_t N, int64_t C) {
  if (N <= 0) return;
  TERA_LAUNCH(c, layernorm_forward_k, grid_x(static_cast<unsigned>(N)), kLayerNormThreads, 0, out, mean, rstd, x, g, b, C);
}

inline void layernorm_forward_bf16(DeviceContext& c, uint16_t* out, float* mean, float* rstd, const float* x, const float* g,
                                   const float* b, int64_t N, int64_t C) {
  if (N <= 0) return;
  TERA_LAUNCH(c, layernorm_forward_bf16_k, grid_x(static_cast<unsigned>(N)), kLayerNormThreads, 0, out, mean, rstd, x, g, b,
              C);
}

inline void layernorm_backward(DeviceContext& c, float* dx, float* dg, float* db, const float* dout, const float* x, const float* g,
                               const float* mean, const float* rstd, int64_t N, int64_t C) {
  if (N <= 0) return;
  TERA_LAUNCH(c, layernorm_backward_dx_k, grid_x(static_cast<unsigned>(N)), kLayerNormThreads, 0, dx, dout, x, g, mean,
              rstd, C);
  const int64_t chunks = (N + kLayerNormRowsPerChunk - 1) / kLayerNormRowsPerChunk;
  auto* part = static_cast<float*>(c.scratch(chunks * 2 * C * static_cast<int64_t>(sizeof(float))));
  const unsigned cblocks = static_cast<unsigned>((C + kThreads - 1) / kThreads);
  TERA_LAUNCH(c, layernorm_backward_partials_k, grid_xy(cblocks, static_cast<unsigned>(chunks)), kThreads, 0, part, dout, x,
              mean, rstd, N, C);
  TERA_LAUNCH(c, layernorm_backward_sum_k, grid_x(cblocks), kThreads, 0, dg, db, static_cast<const float*>(part), chunks,
              C);
}

inline void rmsnorm_forward(DeviceContext& c, float* out, float* rstd, const float* x, const float* g, int64_t N, int64_t C, float eps) {
  if (N > 0) TERA_LAUNCH(c, rmsnorm_forward_k, grid_x(static_cast<unsigned>(N)), kLayerNormThreads, 0, out, rstd, x, g, C, eps);
}

inline void rmsnorm_forward_bf16(DeviceContext& c, uint16_t* out, float* rstd, const float* x, const float* g, int64_t N, int64_t C,
                                 float eps) {
  if (N > 0) {
    TERA_LAUNCH(c, rmsnorm_forward_bf16_k, grid_x(static_cast<unsigned>(N)), kLayerNormThreads, 0, out, rstd, x, g, C, eps);
  }
}

inline void rmsnorm_backward(DeviceContext& c, float* dx, float* dg, const float* dout, const float* x, const float* g, const float* rstd,
                             int64_t N, int64_t C) {
  if (N <= 0) return;
  TERA_LAUNCH(c, rmsnorm_backward_dx_k, grid_x(static_cast<unsigned>(N)), kLayerNormThreads, 0, dx, dout, x, g, rstd, C);
  const int64_t chunks = (N + kLayerNormRowsPerChunk - 1) / kLayerNormRowsPerChunk;
  auto* part = static_cast<float*>(c.scratch(chunks * C * static_cast<int64_t>(sizeof(float))));
  const unsigned cblocks = static_cast<unsigned>((C + kThreads - 1) / kThreads);
  TERA_LAUNCH(c, rmsnorm_backward_partials_k, grid_xy(cblocks, static_cast<unsigned>(chunks)), kThreads, 0, part, dout, x,
              rstd, N, C);
  // dg[c] += the chunk partials in chunk order: the column sums of part[chunks, C].
  TERA_LAUNCH(c, column_sums_k, grid_x(cblocks), kThreads, 0, dg, static_cast<const float*>(part), chunks, C);
}

inline void swiglu_forward(DeviceContext& c, float* out, const float* gate, const float* up, int64_t n) {
  if (n > 0) TERA_LAUNCH(c, swiglu_forward_k, grid_x(blocks_for(n)), kThreads, 0, out, gate, up, n);
}
inline void swiglu_backward(DeviceContext& c, float* dgate, float* dup, const float* gate, const float* up, const float* dout, int64_t n) {
  if (n > 0) TERA_LAUNCH(c, swiglu_backward_k, grid_x(blocks_for(n)), kThreads, 0, dgate, dup, gate, up, dout, n);
}
inline void swiglu_forward_bf16(DeviceContext& c, uint16_t* out, const uint16_t* gate, const uint16_t* up, int64_t n) {
  if (n > 0) TERA_LAUNCH(c, swiglu_forward_bf16_k, grid_x(blocks_for(n)), kThreads, 0, out, gate, up, n);
}
inline void swiglu_backward_bf16(DeviceContext& c, float* dgate, float* dup, const uint16_t* gate, const uint16_t* up, const float* dout,
                                 int64_t n) {
  if (n > 0) TERA_LAUNCH(c, swiglu_backward_bf16_k, grid_x(blocks_for(n)), kThreads, 0, dgate, dup, gate, up, dout, n);
}

inline void rope(DeviceContext& c, float* qkv, int64_t N, int64_t T, int64_t H, int64_t KV, int64_t hs, RopeParams p, double sign) {
  const int64_t n = N * (H + KV) * (hs / 2);
  TERA_ASSERT(hs / 2 <= kRopeMaxPairs, "rope: a head size above 1024 has more pairs than rope_k's table (validate_model_config refuses it)");
  if (n > 0) {
    TERA_LAUNCH(c, rope_k, grid_x(blocks_for(n)), kThreads, 0, qkv, N, T, H, KV, hs, p, sign);
  }
}
inline void rope_forward(DeviceContext& c, float* qkv, int64_t N, int64_t T, int64_t H, int64_t KV, int64_t hs, RopeParams p) {
  rope(c, qkv, N, T, H, KV, hs, p, 1.0);
}
inline void rope_backward(DeviceContext& c, float* dqkv, int64_t N, int64_t T, int64_t H, int64_t KV, int64_t hs, RopeParams p) {
  rope(c, dqkv, N, T, H, KV, hs, p, -1.0);
}

// The bf16 flash kernels run on the tile primitive (flash_attention_tc.cuh)
// where the shape allows and qkv is 32-byte aligned (the tile loads'
// requirement; arena buffers are 64-byte aligned) and B * H fits a grid's
// y dimension, else in scalar form.
inline bool flash_tc(const uint16_t* qkv, int64_t B, int64_t T, int64_t H, int64_t hs) {
  return flash_tc_fits(T, hs) && reinterpret_cast<uintptr_t>(qkv) % 32 == 0 && B * H <= 65535;
}

// Blocks of the tile kernels along T: kFlashTcBlockRows rows each.
inline unsigned flash_tc_blocks(int64_t T) { return static_cast<unsigned>((T + kFlashTcBlockRows - 1) / kFlashTcBlockRows); }

inline float attention_scale(int64_t hs) { return static_cast<float>(1.0 / std::sqrt(static_cast<double>(hs))); }

inline void attention_forward(DeviceContext& c, float* out, float* probs, const float* qkv, int64_t B, int64_t T, int64_t H, int64_t KV,
                              int64_t hs) {
  const AttnShape a{B, T, H, KV, hs};
  if (B * H * T > 0) {
    TERA_LAUNCH(c, attention_forward_k, grid_x(blocks_for(B * H * T)), kThreads, 0, out, probs, static_cast<float*>(nullptr),
                qkv, a, attention_scale(hs));
  }
}
inline void flash_attention_forward(DeviceContext& c, float* out, float* lse, const float* qkv, int64_t B, int64_t T, int64_t H,
                                    int64_t KV, int64_t hs) {
  const AttnShape a{B, T, H, KV, hs};
  if (B * H * T > 0) {
    TERA_LAUNCH(c, attention_forward_k, grid_x(blocks_for(B * H * T)), kThreads, 0, out, static_cast<float*>(nullptr), lse,
                qkv, a, attention_scale(hs));
  }
}
inline void flash_attention_forward_bf16(DeviceContext& c, float* out, float* lse, const uint16_t* qkv, int64_t B, int64_t T, int64_t H,
                                         int64_t KV, int64_t hs) {
  const AttnShape a{B, T, H, KV, hs};
  if (B * H * T <= 0) return;
  if (flash_tc(qkv, B, T, H, hs)) {
    TERA_LAUNCH(c, flash_attention_forward_tc_k, grid_xy(flash_tc_blocks(T), static_cast<unsigned>(B * H)),
                kFlashTcWarps * c.warp, 0, out, lse, qkv, a, attention_scale(hs));
  } else {
    TERA_LAUNCH(c, flash_attention_forward_bf16_k, grid_x(blocks_for(B * H * T)), kThreads, 0, out, lse, qkv, a,
                attention_scale(hs));
  }
}

// Both backwards: D[B,H,T] in scratch, the query side, then the key side.
inline void attention_backward_any(DeviceContext& c, float* dqkv, const float* dout, const float* qkv, const float* out,
                                   const float* probs, const float* lse, const AttnShape& a) {
  if (a.B * a.H * a.T <= 0) return;
  auto* D = static_cast<float*>(c.scratch(a.B * a.H * a.T * static_cast<int64_t>(sizeof(float))));
  TERA_LAUNCH(c, attention_backward_q_k, grid_x(blocks_for(a.B * a.H * a.T)), kThreads, 0, dqkv, D, dout, qkv, out, probs,
              lse, a, attention_scale(a.hs));
  TERA_LAUNCH(c, attention_backward_kv_k, grid_x(blocks_for(a.B * a.KV * a.T)), kThreads, 0, dqkv,
              static_cast<const float*>(D), dout, qkv, probs, lse, a, attention_scale(a.hs));
}
inline void attention_backward(DeviceContext& c, float* dqkv, const float* dout, const float* qkv, const float* probs, int64_t B,
                               int64_t T, int64_t H, int64_t KV, int64_t hs) {
  attention_backward_any(c, dqkv, dout, qkv, static_cast<const float*>(nullptr), probs, static_cast<const float*>(nullptr),
                         AttnShape{B, T, H, KV, hs});
}
inline void flash_attention_backward(DeviceContext& c, float* dqkv, const float* dout, const float* qkv, const float* out,
                                     const float* lse, int64_t B, int64_t T, int64_t H, int64_t KV, int64_t hs) {
  attention_backward_any(c, dqkv, dout, qkv, out, static_cast<const float*>(nullptr), lse, AttnShape{B, T, H, KV, hs});
}
inline void flash_attention_backward_bf16(DeviceContext& c, float* dqkv, const float* dout, const uint16_t* qkv, const uint16_t* out,
                                          const float* lse, int64_t B, int64_t T, int64_t H, int64_t KV, int64_t hs) {
  const AttnShape a{B, T, H, KV, hs};
  if (B * H * T <= 0) return;
  auto* D = static_cast<float*>(c.scratch(B * H * T * static_cast<int64_t>(sizeof(float))));
  if (flash_tc(qkv, B, T, H, hs)) {
    TERA_LAUNCH(c, flash_attention_backward_q_tc_k, grid_xy(flash_tc_blocks(T), static_cast<unsigned>(B * H)),
                kFlashTcWarps * c.warp, 0, dqkv, D, dout, qkv, out, lse, a, attention_scale(hs));
    TERA_LAUNCH(c, flash_attention_backward_kv_tc_k, grid_xy(flash_tc_blocks(T), static_cast<unsigned>(B * KV)),
                kFlashTcWarps * c.warp, 0, dqkv, static_cast<const float*>(D), dout, qkv, lse, a, attention_scale(hs));
    return;
  }
  TERA_LAUNCH(c, flash_attention_backward_q_bf16_k, grid_x(blocks_for(B * H * T)), kThreads, 0, dqkv, D, dout, qkv, out,
              lse, a, attention_scale(hs));
  TERA_LAUNCH(c, flash_attention_backward_kv_bf16_k, grid_x(blocks_for(B * KV * T)), kThreads, 0, dqkv,
              static_cast<const float*>(D), dout, qkv, lse, a, attention_scale(hs));
}

// Ring attention's block ops (flash_attention_block.cuh): the forward, or
// D[B,H,Tq] in scratch, the query side, then the key side.
inline void flash_attention_block_forward(DeviceContext& c, float* out, float* lse, const float* qkv, const float* kv,
                                          const int32_t* pos_q, const int32_t* pos_k, int64_t B, int64_t Tq, int64_t Tk,
                                          int64_t H, int64_t KV, int64_t hs, bool accumulate) {
  const BlockAttnShape a{B, Tq, Tk, H, KV, hs};
  if (B * H * Tq <= 0) return;
  TERA_LAUNCH(c, flash_attention_block_forward_k, grid_x(blocks_for(B * H * Tq)), kThreads, 0, out, lse, qkv, kv, pos_q,
              pos_k, a, attention_scale(hs), accumulate ? 1 : 0);
}
inline void flash_attention_block_backward(DeviceContext& c, float* dqkv, float* dkv, const float* dout, const float* qkv,
                                           const float* kv, const float* out, const float* lse, const int32_t* pos_q,
                                           const int32_t* pos_k, int64_t B, int64_t Tq, int64_t Tk, int64_t H, int64_t KV,
                                           int64_t hs) {
  const BlockAttnShape a{B, Tq, Tk, H, KV, hs};
  if (B * H * Tq <= 0 || Tk <= 0) return;
  auto* D = static_cast<float*>(c.scratch(B * H * Tq * static_cast<int64_t>(sizeof(float))));
  TERA_LAUNCH(c, flash_attention_block_backward_q_k, grid_x(blocks_for(B * H * Tq)), kThreads, 0, dqkv, D, dout, qkv, kv,
              out, lse, pos_q, pos_k, a, attention_scale(hs));
  TERA_LAUNCH(c, flash_attention_block_backward_kv_k, grid_x(blocks_for(B * KV * Tk)), kThreads, 0, dkv,
              static_cast<const float*>(D), dout, qkv, kv, lse, pos_q, pos_k, a, attention_scale(hs));
}

inline void ce_max(DeviceContext& c, float* rowmax, const float* logits, int64_t N, int64_t valid, int64_t ld) {
  if (N > 0) TERA_LAUNCH(c, ce_max_k, grid_x(static_cast<unsigned>(N)), kCeThreads, 0, rowmax, logits, valid, ld);
}
inline void ce_exp_sum(DeviceContext& c, float* sums, float* target_logit, float* logits, const int32_t* targets, const float* rowmax,
                       int64_t N, int64_t valid, int64_t ld, int64_t v0) {
  if (N > 0) {
    TERA_LAUNCH(c, ce_exp_sum_k, grid_x(static_cast<unsigned>(N)), kCeThreads, 0, sums, target_logit, logits, targets,
                rowmax, valid, ld, v0);
  }
}
inline void ce_finalize(DeviceContext& c, float* losses, float* logits, const int32_t* targets, const float* rowmax, const float* sums,
                        const float* target_logit, int64_t N, int64_t valid, int64_t ld, int64_t v0, float dloss) {
  if (N > 0) {
    TERA_LAUNCH(c, ce_finalize_k, grid_x(static_cast<unsigned>(N)), kCeThreads, 0, losses, logits, targets, rowmax, sums,
                target_logit, valid, ld, v0, dloss);
  }
}
// The fused loss: the three phases on one rank, their row statistics in scratch.
inline void cross_entropy(DeviceContext& c, float* losses, float* logits, const int32_t* targets, int64_t N, int64_t V, int64_t Vp,
                          float dloss) {
  if (N <= 0) return;
  auto* stats = static_cast<float*>(c.scratch(3 * N * static_cast<int64_t>(sizeof(float))));
  ce_max(c, stats, logits, N, V, Vp);
  ce_exp_sum(c, stats + N, stats + 2 * N, logits, targets, stats, N, V, Vp, 0);
  ce_finalize(c, losses, logits, targets, stats, stats + N, stats + 2 * N, N, V, Vp, 0, dloss);
}
inline void softmax_row(DeviceContext& c, float* probs, const float* logits, int64_t V, float temperature) {
  if (V > 0) TERA_LAUNCH(c, softmax_row_k, grid_x(1), kCeThreads, 0, probs, logits, V, temperature);
}

inline void embedding_lookup(DeviceContext& c, float* out, const int32_t* tokens, const float* wte_local, int64_t v0, int64_t v1,
                             int64_t N, int64_t C) {
  if (N * C > 0) TERA_LAUNCH(c, embedding_lookup_k, grid_x(blocks_for(N * C)), kThreads, 0, out, tokens, wte_local, v0, v1, N, C);
}
inline void embedding_lookup_backward(DeviceContext& c, float* dwte_local, const float* dout, const int32_t* tokens, int64_t v0,
                                      int64_t v1, int64_t N, int64_t C) {
  if (C > 0 && v1 > v0) {
    const int64_t parts = std::min<int64_t>(kEmbeddingRowParts, v1 - v0);
    TERA_LAUNCH(c, embedding_backward_k, grid_xy(static_cast<unsigned>((C + kThreads - 1) / kThreads),
                                                 static_cast<unsigned>(parts)),
                kThreads, 0, dwte_local, dout, tokens, v0, v1, N, C);
  }
}
inline void position_add(DeviceContext& c, float* out, const float* wpe, int64_t n0, int64_t N, int64_t T, int64_t C) {
  if (N * C > 0) TERA_LAUNCH(c, position_add_k, grid_x(blocks_for(N * C)), kThreads, 0, out, wpe, n0, N, T, C);
}
inline void position_add_backward(DeviceContext& c, float* dwpe, const float* dout, int64_t n0, int64_t N, int64_t T, int64_t C) {
  if (T * C > 0) TERA_LAUNCH(c, position_add_backward_k, grid_x(blocks_for(T * C)), kThreads, 0, dwpe, dout, n0, N, T, C);
}

inline void tile_gemm_bf16(DeviceContext& c, float* C, const uint16_t* A, const uint16_t* B, int64_t M, int64_t N, int64_t K) {
  if (M <= 0 || N <= 0) return;
  TERA_LAUNCH(c, tile_gemm_bf16_k, grid_xy(static_cast<unsigned>(N / 16), static_cast<unsigned>(M / 16)), c.warp,
              0, C, A, B, N, K);
}

// out (+)= reduction of x[0, n): partials from a fixed grid, then one block.
inline void reduce_into(DeviceContext& c, double* out, const float* x, int64_t n, Reduce what, bool accumulate) {
  const unsigned blocks = n <= 0 ? 1u
                                 : static_cast<unsigned>(std::min<int64_t>((n + kReduceThreads - 1) / kReduceThreads,
                                                                           kReduceMaxBlocks));
  auto* part = static_cast<double*>(c.scratch(kReduceMaxBlocks * static_cast<int64_t>(sizeof(double))));
  TERA_LAUNCH(c, reduce_partials_k, grid_x(blocks), kReduceThreads, 0, part, x, n, static_cast<int>(what));
  TERA_LAUNCH(c, reduce_finish_k, grid_x(1), kReduceThreads, 0, out, static_cast<const double*>(part),
              static_cast<int>(blocks), accumulate ? 1 : 0);
}

inline void accumulate_sum(DeviceContext& c, double* acc, const float* x, int64_t n) { reduce_into(c, acc, x, n, Reduce::sum, true); }

// out[g] = the reduction over group g's segments, added in segment order.
inline void reduce_segments(DeviceContext& c, double* out, const SegmentRef* segs, int64_t nsegs, int64_t groups, Reduce what) {
  fill(c, out, DType::f64, 0.0, groups);
  for (int64_t k = 0; k < nsegs; ++k) reduce_into(c, out + segs[k].group, segs[k].data, segs[k].n, what, true);
}
inline void sum_squares(DeviceContext& c, double* out, const SegmentRef* segs, int64_t nsegs, int64_t groups) {
  reduce_segments(c, out, segs, nsegs, groups, Reduce::sum_squares);
}
inline void count_nonfinite(DeviceContext& c, double* out, const SegmentRef* segs, int64_t nsegs, int64_t groups) {
  reduce_segments(c, out, segs, nsegs, groups, Reduce::nonfinite);
}

// The per-call scalars, as kernels/cpu/elementwise.cpp computes them.
// 1 - lr wd: the only per-tensor scalar of the update.
inline float adamw_decay(const AdamWArgs& a, float wd) { return static_cast<float>(1.0 - static_cast<double>(a.lr) * wd); }

inline AdamWScalars adamw_scalars(const AdamWArgs& a, float wd) {
  const double bc1 = 1.0 - std::pow(static_cast<double>(a.beta1), static_cast<double>(a.step));
  const double bc2 = 1.0 - std::pow(static_cast<double>(a.beta2), static_cast<double>(a.step));
  AdamWScalars k{};
  k.decay = adamw_decay(a, wd);
  k.step_size = static_cast<float>(a.lr / bc1);
  k.inv_sqrt_bc2 = static_cast<float>(1.0 / std::sqrt(bc2));
  k.b1 = a.beta1;
  k.b2 = a.beta2;
  k.eps = a.eps;
  k.gs = a.grad_scale;
  k.omb1 = 1.0f - k.b1;
  k.omb2 = 1.0f - k.b2;
  return k;
}

// The segments in batches of up to kAdamWBatch tensors, one launch each
// (adamw.cuh); the dry run adds every batch's count into nonfinite[0].
inline void adamw(DeviceContext& c, const AdamWSegment* segs, int64_t nsegs, const AdamWArgs& a, double* nonfinite) {
  if (nonfinite != nullptr) fill(c, nonfinite, DType::f64, 0.0, 1);
  const AdamWScalars k = adamw_scalars(a, 0.0f);  // the per-tensor decay goes in the table
  AdamWBatch batch{};
  auto flush = [&] {
    if (batch.count == 0) return;
    if (nonfinite == nullptr) {
      TERA_LAUNCH(c, adamw_multi_k, grid_x(blocks_for(batch.total)), kThreads, 0, batch, k, static_cast<double*>(nullptr));
    } else {
      const unsigned blocks = static_cast<unsigned>(std::min<int64_t>(blocks_for(batch.total), kReduceMaxBlocks));
      auto* part = static_cast<double*>(c.scratch(kReduceMaxBlocks * static_cast<int64_t>(sizeof(double))));
      TERA_LAUNCH(c, adamw_multi_k, grid_x(blocks), kThreads, 0, batch, k, part);
      TERA_LAUNCH(c, reduce_finish_k, grid_x(1), kReduceThreads, 0, nonfinite, static_cast<const double*>(part),
                  static_cast<int>(blocks), 1);
    }
    batch = AdamWBatch{};
  };
  for (int64_t s = 0; s < nsegs; ++s) {
    const AdamWSegment& seg = segs[s];
    if (seg.n <= 0) continue;
    batch.t[batch.count] = AdamWTensor{seg.param, seg.grad, seg.m, seg.v, seg.param_bf16, batch.total,
                                       adamw_decay(a, seg.weight_decay)};
    batch.total += seg.n;
    if (++batch.count == kAdamWBatch) flush();
  }
  flush();
}

// --- GEMMs on the dialect's kernels (gemm.cuh) -----------------------------
// The hip backend's linear layers where no vendor GEMM library was found,
// and gpu-emu's with TERA_GPU_EMU_GEMM=tiles (how CI runs them). Row-major
// products as ops.h states them; the bias gradient by the column sums.

inline Dim gemm_grid(const GemmShape& s) {
  return grid_xy(static_cast<unsigned>((s.N + kGemmTile - 1) / kGemmTile),
                 static_cast<unsigned>((s.M + kGemmTile - 1) / kGemmTile));
}
inline void gemm_f32(DeviceContext& c, float* C, const float* A, const float* B, const GemmShape& s,
                     const GemmEpilogue& e) {
  if (s.M > 0 && s.N > 0) TERA_LAUNCH(c, gemm_f32_k, gemm_grid(s), kGemmF32Threads, 0, C, A, B, s, e);
}
inline void gemm_bf16(DeviceContext& c, float* C, const uint16_t* A, const uint16_t* B, const GemmShape& s,
                      const GemmEpilogue& e) {
  if (s.M > 0 && s.N > 0) TERA_LAUNCH(c, gemm_bf16_k, gemm_grid(s), kGemmWarps * c.warp, 0, C, A, B, s, e);
}

inline void tiles_gemm(DeviceContext& c, bool ta, bool tb, int64_t M, int64_t N, int64_t K, float alpha,
                       const float* A, int64_t lda, const float* B, int64_t ldb, float beta, float* C, int64_t ldc) {
  gemm_f32(c, C, A, B, GemmShape{M, N, K, lda, ldb, ldc, ta, tb}, GemmEpilogue{alpha, beta});
}
// y[N,O] = x[N,I] W[O,I]^T + b; dx[N,I] (+)= dy[N,O] W; dW[O,I] += dy^T x.
inline GemmShape linear_y(int64_t N, int64_t I, int64_t O) { return {N, O, I, I, I, O, false, true}; }
inline GemmShape linear_dx(int64_t N, int64_t I, int64_t O) { return {N, I, O, O, I, I, false, false}; }
inline GemmShape linear_dw(int64_t N, int64_t I, int64_t O) { return {O, I, N, O, I, I, true, false}; }

inline void tiles_linear_forward(DeviceContext& c, float* y, const float* x, const float* W, const float* b, int64_t N,
                                 int64_t I, int64_t O) {
  gemm_f32(c, y, x, W, linear_y(N, I, O), GemmEpilogue{1.0f, 0.0f, b});
}
inline void tiles_linear_backward(DeviceContext& c, float* dx, float* dW, float* db, const float* dy, const float* x,
                                  const float* W, int64_t N, int64_t I, int64_t O, bool accumulate_dx) {
  if (dx != nullptr) gemm_f32(c, dx, dy, W, linear_dx(N, I, O), GemmEpilogue{1.0f, accumulate_dx ? 1.0f : 0.0f});
  gemm_f32(c, dW, dy, x, linear_dw(N, I, O), GemmEpilogue{1.0f, 1.0f});
  if (db != nullptr) column_sums(c, db, dy, N, O);
}
inline void tiles_linear_forward_bf16(DeviceContext& c, float* y, const uint16_t* x, const uint16_t* W, const float* b,
                                      int64_t N, int64_t I, int64_t O) {
  gemm_bf16(c, y, x, W, linear_y(N, I, O), GemmEpilogue{1.0f, 0.0f, b});
}
inline void tiles_linear_backward_bf16(DeviceContext& c, float* dx, float* dW, float* db, const float* dy,
                                       const uint16_t* x, const uint16_t* W, int64_t N, int64_t I, int64_t O,
                                       bool accumulate_dx, uint16_t* cast_dy) {
  cast(c, cast_dy, DType::bf16, dy, DType::f32, N * O);  // dy rounded once (ops.h)
  if (dx != nullptr) gemm_bf16(c, dx, cast_dy, W, linear_dx(N, I, O), GemmEpilogue{1.0f, accumulate_dx ? 1.0f : 0.0f});
  gemm_bf16(c, dW, cast_dy, x, linear_dw(N, I, O), GemmEpilogue{1.0f, 1.0f});
  if (db != nullptr) column_sums(c, db, dy, N, O);
}
// The GELU in the GEMM's epilogue: pre = bf16(y), act = bf16(gelu(y)) of
// the fp32 y (the fp32 bias added before rounding).
inline void tiles_linear_gelu_forward_bf16(DeviceContext& c, uint16_t* act, uint16_t* pre, const uint16_t* x,
                                           const uint16_t* W, const float* b, int64_t N, int64_t I, int64_t O,
                                           float* work) {
  GemmEpilogue e{1.0f, 0.0f, b};
  e.act = act;
  e.pre = pre;
  gemm_bf16(c, work, x, W, linear_y(N, I, O), e);
}
inline void tiles_linear_backward_gelu_bf16(DeviceContext& c, float* dpre, float* dW, float* db, const float* dy,
                                            const uint16_t* x, const uint16_t* W, const uint16_t* pre, int64_t N,
                                            int64_t I, int64_t O, uint16_t* cast_dy) {
  tiles_linear_backward_bf16(c, dpre, dW, db, dy, x, W, N, I, O, false, cast_dy);
  gelu_backward_bf16(c, dpre, pre, dpre, N * I);
}

// Fills b's GEMM entries with the dialect's (see above).
inline void set_tile_gemm_ops(BackendOps& b) {
  b.gemm = on_device<tiles_gemm>;
  b.linear_forward = on_device<tiles_linear_forward>;
  b.linear_backward = on_device<tiles_linear_backward>;
  b.linear_forward_bf16 = on_device<tiles_linear_forward_bf16>;
  b.linear_backward_bf16 = on_device<tiles_linear_backward_bf16>;
  b.linear_gelu_forward_bf16 = on_device<tiles_linear_gelu_forward_bf16>;
  b.linear_backward_gelu_bf16 = on_device<tiles_linear_backward_gelu_bf16>;
}

// What a backend on the dialect runs in bf16: every op with a bf16 form,
// the fill of bf16 buffers, the tile GEMM and the fused GELU linears (the
// dialect's passes where a GEMM library has no epilogue for them).
inline bool dialect_supports(BackendContext*, KernelOp op, DType dtype) {
  if (dtype == DType::f32) return true;
  return dtype == DType::bf16 && (kernel_op_need(op) == OpNeed::bf16 || op == KernelOp::fill ||
                                  op == KernelOp::tile_gemm_bf16 || op == KernelOp::linear_gelu_forward_bf16 ||
                                  op == KernelOp::linear_backward_gelu_bf16);
}

// Fills every entry of b that the dialect provides (all but memory,
// ordering, GEMMs and cast, which each backend gives its own way), and
// what it supports.
inline void set_dialect_ops(BackendOps& b) {
  b.supports = dialect_supports;
  b.layernorm_forward = on_device<layernorm_forward>;
  b.layernorm_backward = on_device<layernorm_backward>;
  b.rmsnorm_forward = on_device<rmsnorm_forward>;
  b.rmsnorm_backward = on_device<rmsnorm_backward>;
  b.gelu_forward = on_device<gelu_forward>;
  b.gelu_backward = on_device<gelu_backward>;
  b.swiglu_forward = on_device<swiglu_forward>;
  b.swiglu_backward = on_device<swiglu_backward>;
  b.layernorm_forward_bf16 = on_device<layernorm_forward_bf16>;
  b.rmsnorm_forward_bf16 = on_device<rmsnorm_forward_bf16>;
  b.gelu_forward_bf16 = on_device<gelu_forward_bf16>;
  b.gelu_backward_bf16 = on_device<gelu_backward_bf16>;
  b.swiglu_forward_bf16 = on_device<swiglu_forward_bf16>;
  b.swiglu_backward_bf16 = on_device<swiglu_backward_bf16>;
  b.rope_forward = on_device<rope_forward>;
  b.rope_backward = on_device<rope_backward>;
  b.attention_forward = on_device<attention_forward>;
  b.attention_backward = on_device<attention_backward>;
  b.flash_attention_forward = on_device<flash_attention_forward>;
  b.flash_attention_backward = on_device<flash_attention_backward>;
  b.flash_attention_forward_bf16 = on_device<flash_attention_forward_bf16>;
  b.flash_attention_backward_bf16 = on_device<flash_attention_backward_bf16>;
  b.flash_attention_block_forward = on_device<flash_attention_block_forward>;
  b.flash_attention_block_backward = on_device<flash_attention_block_backward>;
  b.residual_forward = on_device<residual_forward>;
  b.cross_entropy = on_device<cross_entropy>;
  b.softmax_row = on_device<softmax_row>;
  b.embedding_lookup = on_device<embedding_lookup>;
  b.embedding_lookup_backward = on_device<embedding_lookup_backward>;
  b.position_add = on_device<position_add>;
  b.position_add_backward = on_device<position_add_backward>;
  b.bias_residual = on_device<bias_residual>;
  b.ce_max = on_device<ce_max>;
  b.ce_exp_sum = on_device<ce_exp_sum>;
  b.ce_finalize = on_device<ce_finalize>;
  b.accumulate_sum = on_device<accumulate_sum>;
  b.sum_squares = on_device<sum_squares>;
  b.count_nonfinite = on_device<count_nonfinite>;
  b.adamw = on_device<adamw>;
  b.tile_gemm_bf16 = on_device<tile_gemm_bf16>;
}

}  // namespace launch
TERA_GPU_END
