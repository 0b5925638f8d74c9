// General GEMMs in the kernel dialect: the hip backend's where no vendor
// GEMM library (hipBLASLt, rocBLAS) was found at build time, and gpu-emu's
// with TERA_GPU_EMU_GEMM=tiles, which is how CI checks them:
//
//   gemm_bf16_k  C[M,N] = alpha op(A) op(B) + beta C: A, B bf16, products on
//                the tile primitive (kernels/gpu/mma.h: gfx90a's MFMA,
//                tensor cores, the emulated instruction), fp32 accumulation;
//   gemm_f32_k   the same in fp32, each thread an FMA micro-tile.
//
// Row-major: C[M,N] (ldc); op(A)[M,K] is A[M,K] (lda), or A[K,M] read
// transposed (ta); op(B)[K,N] is B[K,N] (ldb), or B[N,K] read transposed
// (tb). Any M, N, K: tiles past the edges are read as zeros and not written.
// Epilogue per call (GemmEpilogue): + bias[N] on every row; the result
// stored fp32 (C), or, for the GPT MLP's up-projection, split into
// pre = bf16(y) and act = bf16(gelu(y)) with y the fp32 result (elementwise.cuh's
// GELU; C unused).
//
// Shape legend: block tile 64 x 64 of C; the bf16 kernel runs 4 warps, each
// a 32 x 32 quarter of it (2 x 2 tiles of 16), the fp32 kernel 256 threads,
// each a 4 x 4 micro-tile; K in steps of 32 through shared memory. Every
// output element is summed by one warp (or thread) in k order: deterministic.
#pragma once

#include "kernels/gpu/dialect.h"
#include "kernels/gpu/kernels/elementwise.cuh"
#include "kernels/gpu/mma.h"

TERA_GPU_BEGIN

constexpr int kGemmTile = 64;     // C rows and columns per block
constexpr int kGemmK = 32;        // k per step
constexpr int kGemmWarps = 4;     // bf16 kernel: warps per block
constexpr int kGemmF32Threads = 256;

struct GemmShape {
  int64_t M, N, K, lda, ldb, ldc;
  bool ta, tb;
};

struct GemmEpilogue {
  float alpha = 1.0f, beta = 0.0f;
  const float* bias = nullptr;  // [N], or null
  uint16_t* act = nullptr;      // GELU split (bf16 [M, N], ld ldc): act and pre instead of C
  uint16_t* pre = nullptr;
  // Device pointers passed by value (gpu-emu translates them at launch).
  template <typename F>
  void for_each_pointer(F&& f) {
    f(bias);
    f(act);
    f(pre);
  }
};

// op(A)[i][k] and op(B)[k][j], zero outside the matrix.
template <typename T>
TERA_DEVICE T gemm_load_a(const T* A, const GemmShape& s, int64_t i, int64_t k) {
  if (i >= s.M || k >= s.K) return T(0);
  return s.ta ? A[k * s.lda + i] : A[i * s.lda + k];
}
template <typename T>
TERA_DEVICE T gemm_load_b(const T* B, const GemmShape& s, int64_t k, int64_t j) {
  if (k >= s.K || j >= s.N) return T(0);
  return s.tb ? B[j * s.ldb + k] : B[k * s.ldb + j];
}

// One output element through the epilogue: v is alpha-free op(A) op(B).
TERA_DEVICE void gemm_store(float* C, const GemmShape& s, const GemmEpilogue& e, int64_t i, int64_t j, float v) {
  if (i >= s.M || j >= s.N) return;
  float y = e.alpha * v;
  if (e.beta != 0.0f) y += e.beta * C[i * s.ldc + j];
  if (e.bias != nullptr) y += e.bias[j];
  if (e.act != nullptr) {
    e.pre[i * s.ldc + j] = float_to_bf16(y);
    e.act[i * s.ldc + j] = float_to_bf16(gelu_f32(y));
  } else {
    C[i * s.ldc + j] = y;
  }
}

// grid (ceil(N / 64), ceil(M / 64)), block: 4 warps.
TERA_KERNEL gemm_bf16_k(float* C, const uint16_t* A, const uint16_t* B, GemmShape s, GemmEpilogue e) {
  TERA_SHARED(uint16_t, As, kGemmTile * kGemmK);  // [64 rows of C][32 k]
  TERA_SHARED(uint16_t, Bs, kGemmK * kGemmTile);  // [32 k][64 columns of C]
  TERA_SHARED(float, Cs, kGemmWarps * 32 * 32);   // each warp's 32 x 32 accumulator
  const int64_t m0 = static_cast<int64_t>(block_y()) * kGemmTile, n0 = static_cast<int64_t>(block_x()) * kGemmTile;
  const int w = warp_id(), wr = w / 2, wc = w % 2;  // the warp's quarter: rows wr*32.., columns wc*32..
  float* Cw = Cs + w * 32 * 32;
  for (int x = lane_id(); x < 32 * 32; x += warp_size()) Cw[x] = 0.0f;
  for (int64_t k0 = 0; k0 < s.K; k0 += kGemmK) {
    block_sync();  // the previous step's tiles are read
    for (int x = thread_x(); x < kGemmTile * kGemmK; x += block_dim_x()) {
      const int r = x / kGemmK, k = x % kGemmK;
      As[x] = gemm_load_a(A, s, m0 + r, k0 + k);
      const int kb = x / kGemmTile, c = x % kGemmTile;
      Bs[x] = gemm_load_b(B, s, k0 + kb, n0 + c);
    }
    block_sync();
    for (int kk = 0; kk < kGemmK; kk += 16) {
      for (int i = 0; i < 2; ++i) {
        for (int j = 0; j < 2; ++j) {
          mma_16x16x16_bf16(Cw + i * 16 * 32 + j * 16, 32, As + (wr * 32 + i * 16) * kGemmK + kk, kGemmK,
                            Bs + kk * kGemmTile + wc * 32 + j * 16, kGemmTile);
        }
      }
    }
  }
  for (int x = lane_id(); x < 32 * 32; x += warp_size()) {
    gemm_store(C, s, e, m0 + wr * 32 + x / 32, n0 + wc * 32 + x % 32, Cw[x]);
  }
}

// grid (ceil(N / 64), ceil(M / 64)), block: 256 threads.
TERA_KERNEL gemm_f32_k(float* C, const float* A, const float* B, GemmShape s, GemmEpilogue e) {
  TERA_SHARED(float, As, kGemmTile * kGemmK);
  TERA_SHARED(float, Bs, kGemmK * kGemmTile);
  const int64_t m0 = static_cast<int64_t>(block_y()) * kGemmTile, n0 = static_cast<int64_t>(block_x()) * kGemmTile;
  const int ty = thread_x() / 16, tx = thread_x() % 16;  // rows ty*4.., columns tx*4.. of the tile
  float acc[4][4] = {};
  for (int64_t k0 = 0; k0 < s.K; k0 += kGemmK) {
    block_sync();
    for (int x = thread_x(); x < kGemmTile * kGemmK; x += block_dim_x()) {
      As[x] = gemm_load_a(A, s, m0 + x / kGemmK, k0 + x % kGemmK);
      Bs[x] = gemm_load_b(B, s, k0 + x / kGemmTile, n0 + x % kGemmTile);
    }
    block_sync();
    for (int k = 0; k < kGemmK; ++k) {
      float a[4], b[4];
      for (int i = 0; i < 4; ++i) a[i] = As[(ty * 4 + i) * kGemmK + k];
      for (int j = 0; j < 4; ++j) b[j] = Bs[k * kGemmTile + tx * 4 + j];
      for (int i = 0; i < 4; ++i)
        for (int j = 0; j < 4; ++j) acc[i][j] += a[i] * b[j];
    }
  }
  for (int i = 0; i < 4; ++i)
    for (int j = 0; j < 4; ++j) gemm_store(C, s, e, m0 + ty * 4 + i, n0 + tx * 4 + j, acc[i][j]);
}

TERA_GPU_END
