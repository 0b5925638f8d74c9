// LayerNorm in the kernel dialect (the arithmetic of kernels/cpu/layernorm.cpp:
// biased variance, eps 1e-5, mean and rstd saved per row).
//   forward:   one block per row; the row's sum and centred sum of squares
//              are block sums (a fixed tree, so deterministic).
//   backward:  dx: one block per row (two block sums: mean(dxhat) and
//              mean(dxhat * xhat)); dg and db: row chunks write partial
//              column sums [chunks, 2, C], then one pass adds the chunks in
//              order: deterministic, no float atomics.
#pragma once

#include "kernels/gpu/dialect.h"

TERA_GPU_BEGIN

constexpr int kLayerNormThreads = 256;        // a multiple of 32 and of 64
constexpr int kLayerNormRowsPerChunk = 32;    // rows per partial of dg/db

// out[N,C], mean[N], rstd[N] from x[N,C], g[C], b[C]; grid (N), block 256.
// Y: the storage of out (float, or bf16 rounded from the fp32 arithmetic).
template <typename Y>
TERA_DEVICE void layernorm_forward_body(Y* out, float* mean, float* rstd, const float* x, const float* g,
                                        const float* b, int64_t C, float* scratch) {
  const int64_t n = block_x();
  const float* xr = x + n * C;
  float s = 0.0f;
  for (int64_t c = thread_x(); c < C; c += block_dim_x()) s += xr[c];
  const float mu = block_sum(s, scratch) / static_cast<float>(C);
  float sq = 0.0f;
  for (int64_t c = thread_x(); c < C; c += block_dim_x()) sq += (xr[c] - mu) * (xr[c] - mu);
  const float var = block_sum(sq, scratch) / static_cast<float>(C);
  const float rs = 1.0f / sqrtf(var + 1e-5f);
  Y* yr = out + n * C;
  for (int64_t c = thread_x(); c < C; c += block_dim_x()) store_f32(yr, c, (xr[c] - mu) * rs * g[c] + b[c]);
  if (thread_x() == 0) {
    mean[n] = mu;
    rstd[n] = rs;
  }
}
TERA_KERNEL layernorm_forward_k(float* out, float* mean, float* rstd, const float* x, const float* g, const float* b,
                                int64_t C) {
  TERA_SHARED(float, scratch, kLayerNormThreads / 32);
  layernorm_forward_body(out, mean, rstd, x, g, b, C, scratch);
}
TERA_KERNEL layernorm_forward_bf16_k(uint16_t* out, float* mean, float* rstd, const float* x, const float* g,
                                     const float* b, int64_t C) {
  TERA_SHARED(float, scratch, kLayerNormThreads / 32);
  layernorm_forward_body(out, mean, rstd, x, g, b, C, scratch);
}

// dx[N,C] += rstd (dxhat - mean(dxhat) - xhat mean(dxhat xhat)); grid (N), block 256.
TERA_KERNEL layernorm_backward_dx_k(float* dx, const float* dout, const float* x, const float* g, const float* mean,
                                    const float* rstd, int64_t C) {
  TERA_SHARED(float, scratch, kLayerNormThreads / 32);
  const int64_t n = block_x();
  const float* xr = x + n * C;
  const float* dyr = dout + n * C;
  const float mu = mean[n], rs = rstd[n];
  float a = 0.0f, b = 0.0f;
  for (int64_t c = thread_x(); c < C; c += block_dim_x()) {
    const float dxhat = dyr[c] * g[c];
    a += dxhat;
    b += dxhat * (xr[c] - mu) * rs;
  }
  const float mean_dxhat = block_sum(a, scratch) / static_cast<float>(C);
  const float mean_dxhat_xhat = block_sum(b, scratch) / static_cast<float>(C);
  float* dxr = dx + n * C;
  for (int64_t c = thread_x(); c < C; c += block_dim_x()) {
    const float xhat = (xr[c] - mu) * rs;
    dxr[c] += rs * (dyr[c] * g[c] - mean_dxhat - xhat * mean_dxhat_xhat);
  }
}

// part[chunk, 0, c] = sum over the chunk's rows of dout * xhat, part[chunk, 1, c]
// = sum of dout; grid (ceil(C / block), chunks).
TERA_KERNEL layernorm_backward_partials_k(float* part, const float* dout, const float* x, const float* mean,
                                          const float* rstd, int64_t N, int64_t C) {
  const int64_t c = static_cast<int64_t>(block_x()) * block_dim_x() + thread_x();
  const int64_t chunk = block_y();
  if (c >= C) return;
  const int64_t n0 = chunk * kLayerNormRowsPerChunk;
  const int64_t n1 = n0 + kLayerNormRowsPerChunk < N ? n0 + kLayerNormRowsPerChunk : N;
  float sg = 0.0f, sb = 0.0f;
  for (int64_t n = n0; n < n1; ++n) {
    const float dy = dout[n * C + c];
    sg += dy * (x[n * C + c] - mean[n]) * rstd[n];
    sb += dy;
  }
  part[(chunk * 2) * C + c] = sg;
  part[(chunk * 2 + 1) * C + c] = sb;
}

// dg[c] += sum over chunks of part[chunk, 0, c] (in chunk order), db likewise.
TERA_KERNEL layernorm_backward_sum_k(float* dg, float* db, const float* part, int64_t chunks, int64_t C) {
  const int64_t c = static_cast<int64_t>(block_x()) * block_dim_x() + thread_x();
  if (c >= C) return;
  float sg = 0.0f, sb = 0.0f;
  for (int64_t k = 0; k < chunks; ++k) {
    sg += part[(k * 2) * C + c];
    sb += part[(k * 2 + 1) * C + c];
  }
  dg[c] += sg;
  db[c] += sb;
}

TERA_GPU_END
