// Small matrix multiply-accumulate on tiles that stay in cache: the inner
// products of the CPU flash attention (flash_attention*.cpp), where a library
// GEMM's call overhead would exceed the work (a tile is 64 x 64 x head size).
//
//   tile_mac_f32:  C[M,N] += A[M,K] B[K,N]           fp32, row-major, leading
//                                                     dimensions in elements
//   tile_mac_bf16: C[M,N] += A[M,2 K2] B[2 K2,N]     bf16 inputs, fp32 C
//     A: rows of bf16 values (lda in bf16 elements, even), a row's values
//        2k and 2k+1 adjacent;
//     B: pair-interleaved: K2 rows of N pairs, B(2k+j, n) at
//        B[2 (k ldb + n) + j] (ldb in pairs), so one 32-bit load per
//        column holds the two values one dot-product step consumes (the
//        layout AMX calls VNNI: a B tile row is 16 pairs of one k2).
//   Odd contraction lengths are padded with a zero pair element.
//   tile_mul_bf16: C = A B, the same with C overwritten (never read).
// AMX runs fastest with K2 a multiple of 16 (callers pad with zero pairs;
// the rest of K2 runs on the AVX-512 form) and the rows of A, B and C at
// 64-byte boundaries (a tile row that straddles two cache lines loads 3-5x
// slower): 64-byte aligned buffers and leading dimensions of 32 bf16, 16
// pairs, 16 floats.
//
// Forms: portable (plain loops; bf16 widened to fp32, which is exact),
// avx512 (fp32 FMA; bf16 widened to fp32 FMA), avx512_bf16 (bf16 pair dot
// products, vdpbf16ps) and amx (bf16 only: 16 x 16 fp32 tiles accumulated by
// tdpbf16ps). Which forms exist is read from the CPU at run time
// (cpu_features.h), so a portable build (-DTERA_NATIVE=OFF) still takes AMX
// where the CPU has it. tile_mac_bf16 runs the selected form: the fastest
// this CPU has, chosen once; tests and benchmarks select others to check or
// time them. Every form rounds nothing but the fp32 accumulation (AMX and
// vdpbf16ps flush denormal inputs and outputs to zero).
#pragma once

#include <cstdint>

namespace tera::cpu {

enum class TileMacForm { portable, avx512, avx512_bf16, amx };

void tile_mac_f32(float* C, int64_t ldc, const float* A, int64_t lda, const float* B, int64_t ldb, int64_t M,
                  int64_t N, int64_t K);
void tile_mac_bf16(float* C, int64_t ldc, const uint16_t* A, int64_t lda, const uint16_t* B, int64_t ldb, int64_t M,
                   int64_t N, int64_t K2);
void tile_mul_bf16(float* C, int64_t ldc, const uint16_t* A, int64_t lda, const uint16_t* B, int64_t ldb, int64_t M,
                   int64_t N, int64_t K2);

// Whether this CPU runs the form (fp32: portable and avx512; bf16: all four).
bool tile_mac_form_available(TileMacForm form, bool bf16);
void tile_mac_f32_form(TileMacForm form, float* C, int64_t ldc, const float* A, int64_t lda, const float* B,
                       int64_t ldb, int64_t M, int64_t N, int64_t K);
// accumulate = false: C = A B (tile_mul_bf16).
void tile_mac_bf16_form(TileMacForm form, float* C, int64_t ldc, const uint16_t* A, int64_t lda, const uint16_t* B,
                        int64_t ldb, int64_t M, int64_t N, int64_t K2, bool accumulate = true);

// The form tile_mac_bf16 runs (chosen on first use: amx, else avx512_bf16,
// else avx512, else portable), and a new choice, which must be available;
// returns the previous one. Not to be changed while a kernel runs.
TileMacForm tile_mac_bf16_selected();
TileMacForm tile_mac_bf16_select(TileMacForm form);
// A form in words ("AMX bf16 tiles"); the selected bf16 form's.
const char* tile_mac_form_name(TileMacForm form, bool bf16);
const char* tile_mac_bf16_path();

// While a scope is open on a thread, the AMX form keeps its tile
// configuration from one call to the next (loading one costs about a
// quarter of a 64 x 64 x 64 product) and the scope's end releases the
// tiles; outside a scope every call loads its own. Open one per thread
// around a kernel's tile products, with no other AMX code (oneDNN's GEMMs
// load their own configuration) on that thread until it closes. Scopes
// nest; they do nothing where the AMX form does not run.
class TileMacScope {
 public:
  TileMacScope();
  ~TileMacScope();
  TileMacScope(const TileMacScope&) = delete;
  TileMacScope& operator=(const TileMacScope&) = delete;
};

}  // namespace tera::cpu
