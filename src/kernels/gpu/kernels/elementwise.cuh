// Elementwise kernels in the kernel dialect: GELU (tanh form) forward and
// backward (fp32, and bf16 storage with fp32 arithmetic), residual add, bias + residual, the copy of a
// block of columns, fill and dtype casts. One thread
// per element over a grid-stride loop; the arithmetic is that of the CPU
// kernels (kernels/cpu/gelu.cpp, elementwise.cpp, memory.cpp) in fp32.
#pragma once

#include "kernels/gpu/dialect.h"

TERA_GPU_BEGIN

// The index range of this thread in a grid-stride loop over n elements.
TERA_DEVICE int64_t grid_first() { return static_cast<int64_t>(block_x()) * block_dim_x() + thread_x(); }
TERA_DEVICE int64_t grid_stride() { return static_cast<int64_t>(grid_dim_x()) * block_dim_x(); }

// GELU, tanh approximation: y = 0.5 x (1 + tanh(k (x + a x^3))), in fp32.
TERA_DEVICE float gelu_f32(float x) {
  const float k = 0.7978845608028654f, a = 0.044715f;
  return 0.5f * x * (1.0f + tanhf(k * (x + a * x * x * x)));
}

// X and Y: the storage of x and y (float, or bf16 as uint16_t; fp32 arithmetic).
template <typename Y, typename X>
TERA_DEVICE void gelu_forward_body(Y* out, const X* x, int64_t n) {
  for (int64_t i = grid_first(); i < n; i += grid_stride()) store_f32(out, i, gelu_f32(load_f32(x, i)));
}

// dx = dout * (0.5 (1 + tanh u) + 0.5 x (1 - tanh^2 u) k (1 + 3 a x^2)), overwritten.
template <typename X>
TERA_DEVICE void gelu_backward_body(float* dx, const X* x, const float* dout, int64_t n) {
  const float k = 0.7978845608028654f, a = 0.044715f;
  for (int64_t i = grid_first(); i < n; i += grid_stride()) {
    const float xi = load_f32(x, i);
    const float t = tanhf(k * (xi + a * xi * xi * xi));
    const float dudx = k * (1.0f + 3.0f * a * xi * xi);
    dx[i] = dout[i] * (0.5f * (1.0f + t) + 0.5f * xi * (1.0f - t * t) * dudx);
  }
}

TERA_KERNEL gelu_forward_k(float* out, const float* x, int64_t n) { gelu_forward_body(out, x, n); }
TERA_KERNEL gelu_backward_k(float* dx, const float* x, const float* dout, int64_t n) {
  gelu_backward_body(dx, x, dout, n);
}
TERA_KERNEL gelu_forward_bf16_k(uint16_t* out, const uint16_t* x, int64_t n) { gelu_forward_body(out, x, n); }
TERA_KERNEL gelu_backward_bf16_k(float* dx, const uint16_t* x, const float* dout, int64_t n) {
  gelu_backward_body(dx, x, dout, n);
}

// The GELU epilogue of linear_gelu_forward_bf16 as its own pass (where the
// GEMM does not apply it): y fp32 (bias added) -> pre = bf16(y), act = bf16(gelu(y)).
TERA_KERNEL gelu_split_bf16_k(uint16_t* act, uint16_t* pre, const float* y, int64_t n) {
  for (int64_t i = grid_first(); i < n; i += grid_stride()) {
    const float v = y[i];
    pre[i] = float_to_bf16(v);
    act[i] = float_to_bf16(gelu_f32(v));
  }
}

TERA_KERNEL residual_forward_k(float* out, const float* a, const float* b, int64_t n) {
  for (int64_t i = grid_first(); i < n; i += grid_stride()) out[i] = a[i] + b[i];
}

// dst[r * ld_dst + c] = src[r * ld_src + c] over rows x cols (ops.h
// copy_columns): one thread per element of the block, row-major, so a
// warp's threads read and write runs of consecutive columns.
TERA_KERNEL copy_columns_k(float* dst, int64_t ld_dst, const float* src, int64_t ld_src, int64_t rows, int64_t cols) {
  for (int64_t i = grid_first(); i < rows * cols; i += grid_stride()) {
    const int64_t r = i / cols, c = i % cols;
    dst[r * ld_dst + c] = src[r * ld_src + c];
  }
}

// out[N,C] = a + bias[C] (if given) + residual[N,C] (if given); added in that order.
TERA_KERNEL bias_residual_k(float* out, const float* a, const float* bias, const float* residual, int64_t N,
                            int64_t C) {
  for (int64_t i = grid_first(); i < N * C; i += grid_stride()) {
    float v = a[i];
    if (bias != nullptr) v += bias[i % C];
    if (residual != nullptr) v += residual[i];
    out[i] = v;
  }
}

TERA_KERNEL fill_f32_k(float* dst, float value, int64_t n) {
  for (int64_t i = grid_first(); i < n; i += grid_stride()) dst[i] = value;
}
TERA_KERNEL fill_f64_k(double* dst, double value, int64_t n) {
  for (int64_t i = grid_first(); i < n; i += grid_stride()) dst[i] = value;
}
TERA_KERNEL fill_u16_k(uint16_t* dst, uint16_t value, int64_t n) {
  for (int64_t i = grid_first(); i < n; i += grid_stride()) dst[i] = value;
}
TERA_KERNEL fill_u8_k(uint8_t* dst, uint8_t value, int64_t n) {
  for (int64_t i = grid_first(); i < n; i += grid_stride()) dst[i] = value;
}
TERA_KERNEL fill_i32_k(int32_t* dst, int32_t value, int64_t n) {
  for (int64_t i = grid_first(); i < n; i += grid_stride()) dst[i] = value;
}

TERA_KERNEL cast_f32_bf16_k(uint16_t* dst, const float* src, int64_t n) {
  for (int64_t i = grid_first(); i < n; i += grid_stride()) dst[i] = float_to_bf16(src[i]);
}
TERA_KERNEL cast_bf16_f32_k(float* dst, const uint16_t* src, int64_t n) {
  for (int64_t i = grid_first(); i < n; i += grid_stride()) dst[i] = bf16_to_float(src[i]);
}
TERA_KERNEL cast_f32_f64_k(double* dst, const float* src, int64_t n) {
  for (int64_t i = grid_first(); i < n; i += grid_stride()) dst[i] = static_cast<double>(src[i]);
}
TERA_KERNEL cast_f64_f32_k(float* dst, const double* src, int64_t n) {
  for (int64_t i = grid_first(); i < n; i += grid_stride()) dst[i] = static_cast<float>(src[i]);
}

// Column sums in two passes, deterministic without atomics (as the
// LayerNorm backward's dg): partials over chunks of kColumnRowsPerChunk rows
// in row order, then the partials in chunk order. Enough blocks for a GPU's
// SMs: ceil(O / block) x ceil(N / chunk), where one pass had ceil(O / block).
constexpr int kColumnRowsPerChunk = 64;

// part[k, c] = sum of dy[n, c] over the rows n of chunk k, in order;
// grid (ceil(O / block), chunks).
TERA_KERNEL column_partials_k(float* part, const float* dy, int64_t N, int64_t O) {
  const int64_t c = static_cast<int64_t>(block_x()) * block_dim_x() + thread_x(), k = block_y();
  if (c >= O) return;
  const int64_t n0 = k * kColumnRowsPerChunk, n1 = n0 + kColumnRowsPerChunk < N ? n0 + kColumnRowsPerChunk : N;
  float s = 0.0f;
  for (int64_t n = n0; n < n1; ++n) s += dy[n * O + c];
  part[k * O + c] = s;
}

// db[c] += sum over rows n of dy[n, c] (a linear layer's bias gradient, or
// the partials above): one thread per column, rows added in order
// (deterministic); grid ceil(O / block).
TERA_KERNEL column_sums_k(float* db, const float* dy, int64_t N, int64_t O) {
  const int64_t c = static_cast<int64_t>(block_x()) * block_dim_x() + thread_x();
  if (c >= O) return;
  float s = 0.0f;
  for (int64_t n = 0; n < N; ++n) s += dy[n * O + c];
  db[c] += s;
}

TERA_GPU_END
