// A bf16 GEMM on the tile primitive (kernels/gpu/mma.h): C[M,N] = A[M,K]
// B[K,N], bf16 inputs, fp32 accumulation and output, row-major, M, N and K
// multiples of 16. One warp per 16 x 16 tile of C, walking K in 16-wide
// steps through shared memory. It is the primitive's check on every target
// (gpu-emu in CI, cuda by tera-device-check), as flash_attention_tc.cuh is
// its use in training; not a replacement for cuBLASLt.
#pragma once

#include "kernels/gpu/dialect.h"
#include "kernels/gpu/mma.h"

TERA_GPU_BEGIN

// grid (N / 16, M / 16), block: one warp.
TERA_KERNEL tile_gemm_bf16_k(float* C, const uint16_t* A, const uint16_t* B, int64_t N, int64_t K) {
  TERA_SHARED(uint16_t, As, 16 * 16);
  TERA_SHARED(uint16_t, Bs, 16 * 16);
  TERA_SHARED(float, Cs, 16 * 16);
  const int64_t row0 = static_cast<int64_t>(block_y()) * 16, col0 = static_cast<int64_t>(block_x()) * 16;
  for (int e = thread_x(); e < 256; e += block_dim_x()) Cs[e] = 0.0f;
  for (int64_t k0 = 0; k0 < K; k0 += 16) {
    for (int e = thread_x(); e < 256; e += block_dim_x()) {
      const int i = e / 16, j = e % 16;
      As[e] = A[(row0 + i) * K + k0 + j];
      Bs[e] = B[(k0 + i) * N + col0 + j];
    }
    block_sync();
    mma_16x16x16_bf16(Cs, 16, As, 16, Bs, 16);
    block_sync();  // the tiles are read before the next step overwrites them
  }
  for (int e = thread_x(); e < 256; e += block_dim_x()) C[(row0 + e / 16) * N + col0 + e % 16] = Cs[e];
}

TERA_GPU_END
