// The forms of tile_mac.h, one entry point each, for tile_mac.cpp's
// dispatch. Each is compiled for its instruction set by function-level
// target attributes (tile_mac_avx512.cpp, tile_mac_amx.cpp), so the build's
// own -march does not decide which exist; the caller checks the CPU first
// (cpu_features.h). Arguments as tile_mac.h's.
#pragma once

#include <cstdint>

namespace tera::cpu::tile_forms {

void portable_f32(float* C, int64_t ldc, const float* A, int64_t lda, const float* B, int64_t ldb, int64_t M,
                  int64_t N, int64_t K);
// accumulate = false: C = A B (C never read).
void portable_bf16(float* C, int64_t ldc, const uint16_t* A, int64_t lda, const uint16_t* B, int64_t ldb, int64_t M,
                   int64_t N, int64_t K2, bool accumulate);

#if defined(__x86_64__)
#define TERA_TILE_FORMS_X86 1
// AVX-512F/BW/DQ/VL.
void avx512_f32(float* C, int64_t ldc, const float* A, int64_t lda, const float* B, int64_t ldb, int64_t M,
                int64_t N, int64_t K);
void avx512_bf16_widened(float* C, int64_t ldc, const uint16_t* A, int64_t lda, const uint16_t* B, int64_t ldb,
                         int64_t M, int64_t N, int64_t K2, bool accumulate);
// And AVX512-BF16.
void avx512_bf16_dot(float* C, int64_t ldc, const uint16_t* A, int64_t lda, const uint16_t* B, int64_t ldb,
                     int64_t M, int64_t N, int64_t K2, bool accumulate);
// AMX-TILE + AMX-BF16 (with AVX-512 for the part of K2 past its multiple of
// 16; AVX512-BF16 there if `dot`, else widened).
void amx_bf16(float* C, int64_t ldc, const uint16_t* A, int64_t lda, const uint16_t* B, int64_t ldb, int64_t M,
              int64_t N, int64_t K2, bool accumulate, bool dot);
// TileMacScope (tile_mac.h) on this thread: opened, closed (the last
// close releases the tiles if a configuration was loaded).
void amx_scope_open();
void amx_scope_close();
#endif

}  // namespace tera::cpu::tile_forms
