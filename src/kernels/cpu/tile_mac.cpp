// Tile multiply-accumulate (tile_mac.h). The AVX-512 forms hold a block of
// up to 4 rows x 64 columns of C in 16 vector registers and walk the
// contraction once: per step, the block's B row (up to 4 vectors, the last
// one masked to the columns that exist) and one broadcast A value per row.
// The build compiles for the build machine's CPU (-march=native), so which
// forms exist is decided at compile time.
#include "kernels/cpu/tile_mac.h"

#include <algorithm>
#include <cstring>

#include "core/check.h"
#include "kernels/cpu/bf16.h"

#if defined(__AVX512F__)
#include <immintrin.h>
#endif

namespace tera::cpu {

namespace {

uint32_t pair_at(const uint16_t* p) {
  uint32_t u;
  std::memcpy(&u, p, sizeof u);
  return u;
}

void portable_f32(float* C, int64_t ldc, const float* A, int64_t lda, const float* B, int64_t ldb, int64_t M,
                  int64_t N, int64_t K) {
  for (int64_t m = 0; m < M; ++m) {
    for (int64_t k = 0; k < K; ++k) {
      const float a = A[m * lda + k];
      for (int64_t n = 0; n < N; ++n) C[m * ldc + n] += a * B[k * ldb + n];
    }
  }
}

void portable_bf16(float* C, int64_t ldc, const uint16_t* A, int64_t lda, const uint16_t* B, int64_t ldb, int64_t M,
                   int64_t N, int64_t K2) {
  for (int64_t m = 0; m < M; ++m) {
    for (int64_t k = 0; k < K2; ++k) {
      const float a0 = from_bf16(A[m * lda + 2 * k]), a1 = from_bf16(A[m * lda + 2 * k + 1]);
      for (int64_t n = 0; n < N; ++n) {
        const uint16_t* b = B + 2 * (k * ldb + n);
        C[m * ldc + n] += a0 * from_bf16(b[0]) + a1 * from_bf16(b[1]);
      }
    }
  }
}

#if defined(__AVX512F__)

// The block's shape: R rows of C (1-4) by NV vectors of 16 columns (1-4).
// `last` masks the columns of the block's last vector.
enum class Kind { f32, bf16_widened, bf16_dot };

template <Kind kind, int R, int NV>
void block(float* C, int64_t ldc, const void* Av, int64_t lda, const void* Bv, int64_t ldb, int64_t K, __mmask16 last) {
  __m512 c[R][NV];
  for (int r = 0; r < R; ++r) {
    for (int j = 0; j < NV; ++j) c[r][j] = _mm512_setzero_ps();
  }
  if constexpr (kind == Kind::f32) {
    const float* A = static_cast<const float*>(Av);
    const float* B = static_cast<const float*>(Bv);
    for (int64_t k = 0; k < K; ++k) {
      __m512 b[NV];
      for (int j = 0; j < NV; ++j) {
        b[j] = j == NV - 1 ? _mm512_maskz_loadu_ps(last, B + k * ldb + 16 * j) : _mm512_loadu_ps(B + k * ldb + 16 * j);
      }
      for (int r = 0; r < R; ++r) {
        const __m512 a = _mm512_set1_ps(A[r * lda + k]);
        for (int j = 0; j < NV; ++j) c[r][j] = _mm512_fmadd_ps(a, b[j], c[r][j]);
      }
    }
  } else {
    // bf16: K counts pairs; B's row k is N 32-bit pairs.
    const uint16_t* A = static_cast<const uint16_t*>(Av);
    const uint16_t* B = static_cast<const uint16_t*>(Bv);
    for (int64_t k = 0; k < K; ++k) {
      __m512i b[NV];
      for (int j = 0; j < NV; ++j) {
        const uint16_t* p = B + 2 * (k * ldb + 16 * j);
        b[j] = j == NV - 1 ? _mm512_maskz_loadu_epi32(last, p) : _mm512_loadu_si512(p);
      }
      for (int r = 0; r < R; ++r) {
        const uint32_t pair = pair_at(A + r * lda + 2 * k);
        if constexpr (kind == Kind::bf16_dot) {
#if defined(__AVX512BF16__)
          const __m512bh a = (__m512bh)_mm512_set1_epi32(static_cast<int>(pair));
          for (int j = 0; j < NV; ++j) c[r][j] = _mm512_dpbf16_ps(c[r][j], a, (__m512bh)b[j]);
#endif
        } else {
          const __m512 a0 = _mm512_set1_ps(from_bf16(static_cast<uint16_t>(pair & 0xffffu)));
          const __m512 a1 = _mm512_set1_ps(from_bf16(static_cast<uint16_t>(pair >> 16)));
          const __m512i hi = _mm512_set1_epi32(static_cast<int>(0xffff0000u));
          for (int j = 0; j < NV; ++j) {
            // (the zero-masked shift: GCC 12 warns on _mm512_slli_epi32's undefined source)
            const __m512 b0 = _mm512_castsi512_ps(_mm512_maskz_slli_epi32(static_cast<__mmask16>(0xffff), b[j], 16));
            const __m512 b1 = _mm512_castsi512_ps(_mm512_and_si512(b[j], hi));
            c[r][j] = _mm512_fmadd_ps(a1, b1, _mm512_fmadd_ps(a0, b0, c[r][j]));
          }
        }
      }
    }
  }
  for (int r = 0; r < R; ++r) {
    for (int j = 0; j < NV; ++j) {
      float* p = C + r * ldc + 16 * j;
      const __mmask16 m = j == NV - 1 ? last : static_cast<__mmask16>(0xffff);
      _mm512_mask_storeu_ps(p, m, _mm512_add_ps(_mm512_maskz_loadu_ps(m, p), c[r][j]));
    }
  }
}

using BlockFn = void (*)(float*, int64_t, const void*, int64_t, const void*, int64_t, int64_t, __mmask16);

template <Kind kind, int R>
constexpr BlockFn kRow[4] = {block<kind, R, 1>, block<kind, R, 2>, block<kind, R, 3>, block<kind, R, 4>};
template <Kind kind>
constexpr const BlockFn* kBlocks[4] = {kRow<kind, 1>, kRow<kind, 2>, kRow<kind, 3>, kRow<kind, 4>};

// Walks C in blocks of 4 rows x 64 columns. a_elem / b_elem: how far (in
// elements of A's and B's storage) a row of A and a column of B step.
template <Kind kind, typename In>
void drive(float* C, int64_t ldc, const In* A, int64_t lda, const In* B, int64_t ldb, int64_t M, int64_t N,
           int64_t K) {
  constexpr int64_t b_col = kind == Kind::f32 ? 1 : 2;  // storage elements per column of B
  for (int64_t n0 = 0; n0 < N; n0 += 64) {
    const int64_t cols = std::min<int64_t>(64, N - n0);
    const int nv = static_cast<int>((cols + 15) / 16);
    const int64_t rem = cols - 16 * (nv - 1);
    const __mmask16 last = static_cast<__mmask16>(rem == 16 ? 0xffffu : (1u << rem) - 1u);
    for (int64_t m0 = 0; m0 < M; m0 += 4) {
      const int r = static_cast<int>(std::min<int64_t>(4, M - m0));
      kBlocks<kind>[r - 1][nv - 1](C + m0 * ldc + n0, ldc, A + m0 * lda, lda, B + n0 * b_col, ldb, K, last);
    }
  }
}

#endif  // __AVX512F__

}  // namespace

bool tile_mac_form_available(TileMacForm form, bool bf16) {
  switch (form) {
    case TileMacForm::portable: return true;
    case TileMacForm::avx512:
#if defined(__AVX512F__)
      return true;
#else
      return false;
#endif
    case TileMacForm::avx512_bf16:
#if defined(__AVX512F__) && defined(__AVX512BF16__)
      return bf16;
#else
      return false;
#endif
  }
  return false;
}

void tile_mac_f32_form(TileMacForm form, float* C, int64_t ldc, const float* A, int64_t lda, const float* B,
                       int64_t ldb, int64_t M, int64_t N, int64_t K) {
  TERA_ASSERT(tile_mac_form_available(form, false), "tile_mac_f32: form not available on this CPU");
#if defined(__AVX512F__)
  if (form == TileMacForm::avx512) return drive<Kind::f32>(C, ldc, A, lda, B, ldb, M, N, K);
#endif
  portable_f32(C, ldc, A, lda, B, ldb, M, N, K);
}

void tile_mac_bf16_form(TileMacForm form, float* C, int64_t ldc, const uint16_t* A, int64_t lda, const uint16_t* B,
                        int64_t ldb, int64_t M, int64_t N, int64_t K2) {
  TERA_ASSERT(tile_mac_form_available(form, true), "tile_mac_bf16: form not available on this CPU");
#if defined(__AVX512F__)
  if (form == TileMacForm::avx512) return drive<Kind::bf16_widened>(C, ldc, A, lda, B, ldb, M, N, K2);
#if defined(__AVX512BF16__)
  if (form == TileMacForm::avx512_bf16) return drive<Kind::bf16_dot>(C, ldc, A, lda, B, ldb, M, N, K2);
#endif
#endif
  portable_bf16(C, ldc, A, lda, B, ldb, M, N, K2);
}

void tile_mac_f32(float* C, int64_t ldc, const float* A, int64_t lda, const float* B, int64_t ldb, int64_t M,
                  int64_t N, int64_t K) {
#if defined(__AVX512F__)
  drive<Kind::f32>(C, ldc, A, lda, B, ldb, M, N, K);
#else
  portable_f32(C, ldc, A, lda, B, ldb, M, N, K);
#endif
}

void tile_mac_bf16(float* C, int64_t ldc, const uint16_t* A, int64_t lda, const uint16_t* B, int64_t ldb, int64_t M,
                   int64_t N, int64_t K2) {
#if defined(__AVX512F__) && defined(__AVX512BF16__)
  drive<Kind::bf16_dot>(C, ldc, A, lda, B, ldb, M, N, K2);
#elif defined(__AVX512F__)
  drive<Kind::bf16_widened>(C, ldc, A, lda, B, ldb, M, N, K2);
#else
  portable_bf16(C, ldc, A, lda, B, ldb, M, N, K2);
#endif
}

const char* tile_mac_bf16_path() {
#if defined(__AVX512F__) && defined(__AVX512BF16__)
  return "AVX512-BF16 dot products";
#elif defined(__AVX512F__)
  return "bf16 widened to fp32, AVX-512 FMA";
#else
  return "bf16 widened to fp32, portable loops";
#endif
}

}  // namespace tera::cpu
