// Small matrix multiply-accumulate on tiles that stay in cache: the inner
// products of the CPU flash attention (flash_attention.cpp), where a library
// GEMM's call overhead would exceed the work (a tile is 64 x 64 x head size).
//
//   tile_mac_f32:  C[M,N] += A[M,K] B[K,N]           fp32, row-major, leading
//                                                     dimensions in elements
//   tile_mac_bf16: C[M,N] += A[M,2 K2] B[2 K2,N]     bf16 inputs, fp32 C
//     A: rows of bf16 values (lda in bf16 elements, even), a row's values
//        2k and 2k+1 adjacent;
//     B: pair-interleaved: K2 rows of N pairs, B(2k+j, n) at
//        B[2 (k ldb + n) + j] (ldb in pairs), so one 32-bit load per
//        column holds the two values one dot-product step consumes.
//   Odd contraction lengths are padded with a zero pair element.
//
// Each has a portable form (plain loops; bf16 widened to fp32, which is
// exact) and AVX-512 forms: fp32 FMA, bf16 widened to fp32 FMA, and bf16
// pair dot products (vdpbf16ps) where the CPU has AVX512-BF16. The
// unsuffixed functions take the fastest form this build's CPU has; the
// others stay callable so tests check every form the CPU can run.
#pragma once

#include <cstdint>

namespace tera::cpu {

void tile_mac_f32(float* C, int64_t ldc, const float* A, int64_t lda, const float* B, int64_t ldb, int64_t M,
                  int64_t N, int64_t K);
void tile_mac_bf16(float* C, int64_t ldc, const uint16_t* A, int64_t lda, const uint16_t* B, int64_t ldb, int64_t M,
                   int64_t N, int64_t K2);

// The forms, by name. "portable" always runs; "avx512" (fp32 FMA, bf16
// widened) needs AVX-512F; "avx512_bf16" (bf16 only) needs AVX512-BF16.
enum class TileMacForm { portable, avx512, avx512_bf16 };
bool tile_mac_form_available(TileMacForm form, bool bf16);  // compiled in for this CPU
void tile_mac_f32_form(TileMacForm form, float* C, int64_t ldc, const float* A, int64_t lda, const float* B,
                       int64_t ldb, int64_t M, int64_t N, int64_t K);
void tile_mac_bf16_form(TileMacForm form, float* C, int64_t ldc, const uint16_t* A, int64_t lda, const uint16_t* B,
                        int64_t ldb, int64_t M, int64_t N, int64_t K2);
// The form tile_mac_bf16 runs here, in words ("AVX512-BF16 dot products").
const char* tile_mac_bf16_path();

}  // namespace tera::cpu
