// The attention ops of ops.h as launches of the kernel dialect: naive
// attention, flash attention in fp32 and bf16 (the tile primitive where the
// shape allows), and ring attention's block ops. Part of ops_launch.h's
// table (set_dialect_ops fills them).
#pragma once

#include <cmath>
#include <cstdint>

#include "kernels/gpu/device_context.h"
#include "kernels/gpu/kernels/attention.cuh"
#include "kernels/gpu/kernels/flash_attention_block.cuh"
#include "kernels/gpu/kernels/flash_attention_tc.cuh"

TERA_GPU_BEGIN
namespace launch {

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

}  // namespace launch
TERA_GPU_END
