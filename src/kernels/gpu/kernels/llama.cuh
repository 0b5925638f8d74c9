// The Llama-family kernels in the kernel dialect, with the arithmetic of the
// CPU kernels (kernels/cpu/rmsnorm.cpp, swiglu.cpp, rope.cpp):
//   RMSNorm:  one block per row (block sums); dg from row-chunk partials
//             added in order (deterministic, as LayerNorm's).
//   SwiGLU:   elementwise, out = silu(gate) up (fp32, and bf16 storage).
//   RoPE:     one thread per (row, head, pair), the angle in double as the
//             CPU computes it, rotated in place (backward: the inverse angle).
#pragma once

#include "core/rope_params.h"
#include "kernels/gpu/dialect.h"
#include "kernels/gpu/kernels/elementwise.cuh"
#include "kernels/gpu/kernels/layernorm.cuh"

TERA_GPU_BEGIN

// out[N,C] = x rstd g, rstd[N] = 1 / sqrt(mean(x^2) + eps); grid (N), block 256.
// Y: the storage of out (float, or bf16 rounded from the fp32 arithmetic).
template <typename Y>
TERA_DEVICE void rmsnorm_forward_body(Y* out, float* rstd, const float* x, const float* g, int64_t C, float eps,
                                      float* scratch) {
  const int64_t n = block_x();
  const float* xr = x + n * C;
  float sq = 0.0f;
  for (int64_t c = thread_x(); c < C; c += block_dim_x()) sq += xr[c] * xr[c];
  sq = block_sum(sq, scratch);
  const float rs = static_cast<float>(1.0 / sqrt(static_cast<double>(sq / static_cast<float>(C)) + static_cast<double>(eps)));
  Y* yr = out + n * C;
  for (int64_t c = thread_x(); c < C; c += block_dim_x()) store_f32(yr, c, xr[c] * rs * g[c]);
  if (thread_x() == 0) rstd[n] = rs;
}
TERA_KERNEL rmsnorm_forward_k(float* out, float* rstd, const float* x, const float* g, int64_t C, float eps) {
  TERA_SHARED(float, scratch, kLayerNormThreads / 32);
  rmsnorm_forward_body(out, rstd, x, g, C, eps, scratch);
}
TERA_KERNEL rmsnorm_forward_bf16_k(uint16_t* out, float* rstd, const float* x, const float* g, int64_t C, float eps) {
  TERA_SHARED(float, scratch, kLayerNormThreads / 32);
  rmsnorm_forward_body(out, rstd, x, g, C, eps, scratch);
}

// dx[N,C] += rstd (dxhat - xhat mean(dxhat xhat)); grid (N), block 256.
TERA_KERNEL rmsnorm_backward_dx_k(float* dx, const float* dout, const float* x, const float* g, const float* rstd,
                                  int64_t C) {
  TERA_SHARED(float, scratch, kLayerNormThreads / 32);
  const int64_t n = block_x();
  const float* xr = x + n * C;
  const float* dyr = dout + n * C;
  const float rs = rstd[n];
  float a = 0.0f;
  for (int64_t c = thread_x(); c < C; c += block_dim_x()) a += dyr[c] * g[c] * xr[c] * rs;
  const float m = block_sum(a, scratch) / static_cast<float>(C);
  float* dxr = dx + n * C;
  for (int64_t c = thread_x(); c < C; c += block_dim_x()) dxr[c] += rs * (dyr[c] * g[c] - xr[c] * rs * m);
}

// part[chunk, c] = sum over the chunk's rows of dout x rstd; grid (ceil(C/block), chunks).
TERA_KERNEL rmsnorm_backward_partials_k(float* part, const float* dout, const float* x, const float* rstd, int64_t N,
                                        int64_t C) {
  const int64_t c = static_cast<int64_t>(block_x()) * block_dim_x() + thread_x();
  const int64_t chunk = block_y();
  if (c >= C) return;
  const int64_t n0 = chunk * kLayerNormRowsPerChunk;
  const int64_t n1 = n0 + kLayerNormRowsPerChunk < N ? n0 + kLayerNormRowsPerChunk : N;
  float s = 0.0f;
  for (int64_t n = n0; n < n1; ++n) s += dout[n * C + c] * x[n * C + c] * rstd[n];
  part[chunk * C + c] = s;
}

// S, O: the storage of gate and up, and of out (float, or bf16; fp32 arithmetic).
template <typename O, typename S>
TERA_DEVICE void swiglu_forward_body(O* out, const S* gate, const S* up, int64_t n) {
  for (int64_t i = grid_first(); i < n; i += grid_stride()) {
    const float z = load_f32(gate, i);
    const float s = 1.0f / (1.0f + expf(-z));
    store_f32(out, i, z * s * load_f32(up, i));
  }
}

template <typename S>
TERA_DEVICE void swiglu_backward_body(float* dgate, float* dup, const S* gate, const S* up, const float* dout,
                                      int64_t n) {
  for (int64_t i = grid_first(); i < n; i += grid_stride()) {
    const float z = load_f32(gate, i);
    const float s = 1.0f / (1.0f + expf(-z));
    const float d = dout[i];
    dup[i] = d * z * s;
    dgate[i] = d * load_f32(up, i) * s * (1.0f + z * (1.0f - s));
  }
}

TERA_KERNEL swiglu_forward_k(float* out, const float* gate, const float* up, int64_t n) {
  swiglu_forward_body(out, gate, up, n);
}
TERA_KERNEL swiglu_backward_k(float* dgate, float* dup, const float* gate, const float* up, const float* dout,
                              int64_t n) {
  swiglu_backward_body(dgate, dup, gate, up, dout, n);
}
TERA_KERNEL swiglu_forward_bf16_k(uint16_t* out, const uint16_t* gate, const uint16_t* up, int64_t n) {
  swiglu_forward_body(out, gate, up, n);
}
TERA_KERNEL swiglu_backward_bf16_k(float* dgate, float* dup, const uint16_t* gate, const uint16_t* up,
                                   const float* dout, int64_t n) {
  swiglu_backward_body(dgate, dup, gate, up, dout, n);
}

// Pairs a head may have: rope_k's frequency table in shared memory (8 bytes each).
constexpr int64_t kRopeMaxPairs = 512;  // head size <= 1024

// Rotates the q and k heads of qkv[N, (H+2KV) hs] in place by the angles of
// row n's position (n mod T, or pos[n mod T] with a position table pos[T])
// and rope_inv_freq (core/rope_params.h, shared with the CPU kernel); sign -1
// undoes it (the backward). One thread per (row, q-or-k head, pair index
// i < hs/2). Each block first tabulates the hs/2 frequencies in shared memory
// (hs/2 <= kRopeMaxPairs), so the scaling's branches and constants stay out
// of the loop (on gfx90a they would spill scalar registers there).
TERA_KERNEL rope_k(float* qkv, int64_t N, int64_t T, int64_t H, int64_t KV, int64_t hs, RopeParams p, const int32_t* pos,
                   double sign) {
  TERA_SHARED(double, inv_freq, kRopeMaxPairs);
  const int64_t half = hs / 2, heads = H + KV, width = (H + 2 * KV) * hs;
  for (int64_t i = thread_x(); i < half; i += block_dim_x()) inv_freq[i] = rope_inv_freq(p, i, hs);
  block_sync();
  const int64_t total = N * heads * half;
  for (int64_t idx = grid_first(); idx < total; idx += grid_stride()) {
    const int64_t i = idx % half, h = (idx / half) % heads, n = idx / (half * heads);
    const int64_t t = n % T;
    const double a = static_cast<double>(pos != nullptr ? pos[t] : t) * inv_freq[i];
    const float c = static_cast<float>(cos(a)), s = static_cast<float>(sign * sin(a));
    float* x = qkv + n * width + h * hs;
    const float x1 = x[i], x2 = x[half + i];
    x[i] = x1 * c - x2 * s;
    x[half + i] = x2 * c + x1 * s;
  }
}

TERA_GPU_END
