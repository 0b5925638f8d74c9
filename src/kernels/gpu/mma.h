// The tile matrix-multiply-accumulate primitive of the kernel dialect:
//
//   mma_16x16x16_bf16(C, ldc, A, lda, B, ldb):       C[16,16] += A[16,16] B[16,16]
//   mma_16x16x16_bf16_bt(C, ldc, A, lda, Bt, ldbt):  C[16,16] += A[16,16] Bt[16,16]^T
//
// A, B and Bt bf16 (uint16_t), C fp32, all row-major (Bt holds B's columns
// as rows: a tile of keys for Q K^T), in shared or global memory, 32-byte
// aligned, lda, ldb and ldbt multiples of 8, ldc a multiple of 4; called by every
// lane of one warp (a collective: in divergent code it deadlocks on gpu-emu,
// as it hangs on a GPU). Products of bf16 values are exact in fp32; the 16
// terms of each output are accumulated in fp32 in an order the hardware
// chooses, so |err| <= 17 * 2^-24 * sum |a b| + |C| rounding.
//   CUDA:   tensor cores (wmma, bf16 inputs, fp32 accumulator; sm_80+).
//   HIP:    the lanes' scalar form below (gfx90a's MFMA is not wired yet).
//   gpu-emu: the scalar form: lane l computes outputs l, l + warp, ...
#pragma once

#include <type_traits>

#include "kernels/gpu/dialect.h"

#if defined(TERA_GPU_CUDA)
#include <cuda_bf16.h>
#include <mma.h>
#endif

TERA_GPU_BEGIN

// The one body of both forms: B row-major (kBt false) or given by its
// columns as rows (kBt true: B[k][n] = B[n * ldb + k]).
template <bool kBt>
TERA_DEVICE void mma_16x16x16_bf16_tile(float* C, int ldc, const uint16_t* A, int lda, const uint16_t* B, int ldb) {
#if defined(TERA_GPU_CUDA)
  namespace wmma = nvcuda::wmma;
  using BLayout = std::conditional_t<kBt, wmma::col_major, wmma::row_major>;
  wmma::fragment<wmma::matrix_a, 16, 16, 16, __nv_bfloat16, wmma::row_major> a;
  wmma::fragment<wmma::matrix_b, 16, 16, 16, __nv_bfloat16, BLayout> b;
  wmma::fragment<wmma::accumulator, 16, 16, 16, float> c;
  wmma::load_matrix_sync(a, reinterpret_cast<const __nv_bfloat16*>(A), static_cast<unsigned>(lda));
  wmma::load_matrix_sync(b, reinterpret_cast<const __nv_bfloat16*>(B), static_cast<unsigned>(ldb));
  wmma::load_matrix_sync(c, C, static_cast<unsigned>(ldc), wmma::mem_row_major);
  wmma::mma_sync(c, a, b, c);
  wmma::store_matrix_sync(C, c, static_cast<unsigned>(ldc), wmma::mem_row_major);
#else
  warp_sync();  // the tiles every lane wrote are visible to every lane
  for (int e = lane_id(); e < 256; e += warp_size()) {
    const int i = e / 16, j = e % 16;
    float s = C[i * ldc + j];
    for (int k = 0; k < 16; ++k) s += bf16_to_float(A[i * lda + k]) * bf16_to_float(kBt ? B[j * ldb + k] : B[k * ldb + j]);
    C[i * ldc + j] = s;
  }
  warp_sync();  // C is complete before any lane reads it
#endif
}

TERA_DEVICE void mma_16x16x16_bf16(float* C, int ldc, const uint16_t* A, int lda, const uint16_t* B, int ldb) {
  mma_16x16x16_bf16_tile<false>(C, ldc, A, lda, B, ldb);
}
TERA_DEVICE void mma_16x16x16_bf16_bt(float* C, int ldc, const uint16_t* A, int lda, const uint16_t* Bt, int ldbt) {
  mma_16x16x16_bf16_tile<true>(C, ldc, A, lda, Bt, ldbt);
}

TERA_GPU_END
