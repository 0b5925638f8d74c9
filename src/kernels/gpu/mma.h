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
//   HIP:    gfx90a's matrix cores: one v_mfma_f32_16x16x16bf16_1k per tile,
//           the fragments loaded and stored in the instruction's lane layout
//           (mma_tile_mfma below).
//   gpu-emu: at warp 64 the same MFMA form, the instruction itself modelled
//           by one gather of the wave's fragments (mfma_16x16x16_bf16_1k's
//           emulated body, emu::warp_gather_bits), so the
//           fragment layout is what CI checks; at warp 32 the scalar form:
//           lane l computes outputs l, l + warp, ...
#pragma once

#include <bit>
#include <type_traits>

#include "kernels/gpu/dialect.h"

#if defined(TERA_GPU_CUDA)
#include <cuda_bf16.h>
#include <mma.h>
#endif

TERA_GPU_BEGIN

#if !defined(TERA_GPU_CUDA)  // CUDA runs wmma (below)
// gfx90a's v_mfma_f32_16x16x16bf16_1k on one wave of 64 lanes: D = A B + C
// for 16 x 16 tiles, lane l = 16 g + r (g = l / 16, r = l % 16) holding
//   a[v] = A[r][4 g + v],  b[v] = B[4 g + v][r],  c[v] = C[4 g + v][r]  (v = 0..3)
// (AMD's layout for the 16x16x16 MFMA: the k dimension split in four groups
// of lanes, 4 consecutive k per lane; D as C). Products of bf16 are exact in
// fp32, sums in fp32.
struct MfmaFragments {
  uint16_t a[4], b[4];
  float c[4];
};

TERA_DEVICE void mfma_16x16x16_bf16_1k(MfmaFragments& f) {
#if defined(TERA_GPU_HIP)
  typedef short bf16x4 __attribute__((ext_vector_type(4)));
  typedef float f32x4 __attribute__((ext_vector_type(4)));
  bf16x4 a, b;
  f32x4 c;
  for (int v = 0; v < 4; ++v) {
    a[v] = static_cast<short>(f.a[v]);
    b[v] = static_cast<short>(f.b[v]);
    c[v] = f.c[v];
  }
  c = __builtin_amdgcn_mfma_f32_16x16x16bf16_1k(a, b, c, 0, 0, 0);
  for (int v = 0; v < 4; ++v) f.c[v] = c[v];
#else  // gpu-emu
  // The instruction's semantics from its lane layout: the wave's fragments
  // gathered in one rendezvous (each fragment's four bf16 values in one
  // 64-bit word, bit for bit), each lane keeping the A rows and the B column
  // of its own outputs.
  const int l = lane_id(), g = l / 16, r = l % 16;
  auto pack = [](const uint16_t (&x)[4]) {
    return uint64_t{x[0]} | (uint64_t{x[1]} << 16) | (uint64_t{x[2]} << 32) | (uint64_t{x[3]} << 48);
  };
  uint64_t all_a[64], all_b[64];
  emu::warp_gather_bits(pack(f.a), all_a, {__FILE__, __LINE__});
  emu::warp_gather_bits(pack(f.b), all_b, {__FILE__, __LINE__});
  auto value = [](uint64_t bits, int v) { return bf16_to_float(static_cast<uint16_t>(bits >> (16 * v))); };
  for (int v = 0; v < 4; ++v) {  // output row 4 g + v, column r
    float s = f.c[v];
    for (int k = 0; k < 16; ++k) {  // A[4g+v][k] is on lane 16 (k / 4) + 4g + v, B[k][r] on lane 16 (k / 4) + r
      s += value(all_a[16 * (k / 4) + 4 * g + v], k % 4) * value(all_b[16 * (k / 4) + r], k % 4);
    }
    f.c[v] = s;
  }
#endif
}

// The tile product in the MFMA form: fragments loaded in the instruction's
// layout, one MFMA, C stored back. B row-major, or by its columns (kBt).
template <bool kBt>
TERA_DEVICE void mma_tile_mfma(float* C, int ldc, const uint16_t* A, int lda, const uint16_t* B, int ldb) {
  const int l = lane_id(), g = l / 16, r = l % 16;
  MfmaFragments f;
  for (int v = 0; v < 4; ++v) {
    const int k = 4 * g + v;
    f.a[v] = A[r * lda + k];
    f.b[v] = kBt ? B[r * ldb + k] : B[k * ldb + r];
    f.c[v] = C[k * ldc + r];  // row 4 g + v
  }
  mfma_16x16x16_bf16_1k(f);
  for (int v = 0; v < 4; ++v) C[(4 * g + v) * ldc + r] = f.c[v];
}
#endif

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
#elif defined(TERA_GPU_HIP)
  warp_sync();  // the tiles every lane wrote are visible to every lane
  mma_tile_mfma<kBt>(C, ldc, A, lda, B, ldb);
  warp_sync();  // C is complete before any lane reads it
#else
  warp_sync();  // the tiles every lane wrote are visible to every lane
  if (warp_size() == 64) {  // AMD's width: the MFMA form, its instruction emulated
    mma_tile_mfma<kBt>(C, ldc, A, lda, B, ldb);
    warp_sync();
    return;
  }
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
