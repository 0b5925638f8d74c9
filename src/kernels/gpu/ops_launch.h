// The ops.h entries of the GPU backends, written once as launches of the
// kernel dialect: the cuda backend (nvcc), the HIP compile check (hipcc) and
// gpu-emu (g++) include this in one translation unit each. Every entry takes
// the backend's DeviceContext first (device_context.h): the stream its
// launches go to, its scratch memory, its warp width. Every pointer an entry receives is
// device memory; segment lists (SumSquaresFn, AdamWFn) are host arrays of
// device pointers, read when the entry is called: sums of squares launch per
// segment, AdamW per batch of up to kAdamWBatch segments (adamw.cuh).
//
// Every op of ops.h but the GEMMs (library calls: cuBLASLt on cuda, a host
// GEMM on gpu-emu) is written here or in the family headers it includes:
// ops_launch_attention.h (attention, flash, ring blocks) and
// ops_launch_loss_optim.h (loss, embeddings, reductions, AdamW); this file
// has the elementwise (copy_columns among them), norm, MLP and rotary ops,
// the dialect's own GEMMs, and the table (set_dialect_ops).
#pragma once

#include <cmath>

#include "core/check.h"
#include "kernels/gpu/dialect.h"
#include "kernels/gpu/kernels/elementwise.cuh"
#include "kernels/gpu/kernels/gemm.cuh"
#include "kernels/gpu/kernels/layernorm.cuh"
#include "kernels/gpu/kernels/llama.cuh"
#include "kernels/gpu/kernels/tile_gemm.cuh"
#include "kernels/backend.h"
#include "kernels/ops.h"
#include "kernels/gpu/device_context.h"
#include "kernels/gpu/ops_launch_attention.h"
#include "kernels/gpu/ops_launch_loss_optim.h"

TERA_GPU_BEGIN

namespace launch {

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
// The backward's dpre comes from the dx product alone, so dW and db may be
// null (ops.h) and `linear` skips them.
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
// grid: blocks_for(rows * cols), block: kThreads; one thread per element.
inline void copy_columns(DeviceContext& c, float* dst, int64_t ld_dst, const float* src, int64_t ld_src, int64_t rows,
                         int64_t cols) {
  if (rows > 0 && cols > 0) {
    TERA_LAUNCH(c, copy_columns_k, grid_x(blocks_for(rows * cols)), kThreads, 0, dst, ld_dst, src, ld_src, rows, cols);
  }
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

inline void rope(DeviceContext& c, float* qkv, int64_t N, int64_t T, int64_t H, int64_t KV, int64_t hs, RopeParams p,
                 const int32_t* pos, double sign) {
  const int64_t n = N * (H + KV) * (hs / 2);
  TERA_ASSERT(hs / 2 <= kRopeMaxPairs, "rope: a head size above 1024 has more pairs than rope_k's table (validate_model_config refuses it)");
  if (n > 0) {
    TERA_LAUNCH(c, rope_k, grid_x(blocks_for(n)), kThreads, 0, qkv, N, T, H, KV, hs, p, pos, sign);
  }
}
inline void rope_forward(DeviceContext& c, float* qkv, int64_t N, int64_t T, int64_t H, int64_t KV, int64_t hs, RopeParams p,
                         const int32_t* pos) {
  rope(c, qkv, N, T, H, KV, hs, p, pos, 1.0);
}
inline void rope_backward(DeviceContext& c, float* dqkv, int64_t N, int64_t T, int64_t H, int64_t KV, int64_t hs, RopeParams p,
                          const int32_t* pos) {
  rope(c, dqkv, N, T, H, KV, hs, p, pos, -1.0);
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
// In the backwards each of dx, dW, db is skipped when null (ops.h).
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
  if (dW != nullptr) gemm_f32(c, dW, dy, x, linear_dw(N, I, O), GemmEpilogue{1.0f, 1.0f});
  if (db != nullptr) column_sums(c, db, dy, N, O);
}
inline void tiles_linear_forward_bf16(DeviceContext& c, float* y, const uint16_t* x, const uint16_t* W, const float* b,
                                      int64_t N, int64_t I, int64_t O) {
  gemm_bf16(c, y, x, W, linear_y(N, I, O), GemmEpilogue{1.0f, 0.0f, b});
}
inline void tiles_linear_backward_bf16(DeviceContext& c, float* dx, float* dW, float* db, const float* dy,
                                       const uint16_t* x, const uint16_t* W, int64_t N, int64_t I, int64_t O,
                                       bool accumulate_dx, uint16_t* cast_dy) {
  // dy rounded once per call, for the products it runs (ops.h)
  if (dx != nullptr || dW != nullptr) cast(c, cast_dy, DType::bf16, dy, DType::f32, N * O);
  if (dx != nullptr) gemm_bf16(c, dx, cast_dy, W, linear_dx(N, I, O), GemmEpilogue{1.0f, accumulate_dx ? 1.0f : 0.0f});
  if (dW != nullptr) gemm_bf16(c, dW, cast_dy, x, linear_dw(N, I, O), GemmEpilogue{1.0f, 1.0f});
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
  b.copy_columns = on_device<copy_columns>;
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
