// The AVX-512 forms of tile_mac (tile_mac_forms.h): a block of up to 4 rows
// x 64 columns of C held in 16 vector registers while the contraction is
// walked once; per step, the block's B row (up to 4 vectors, the last one
// masked to the columns that exist) and one broadcast A value (fp32) or pair
// (bf16) per row; at the end the block is added to C, or stored over it
// (C = A B: C never read). Compiled for AVX-512 by target attributes whatever the
// build's -march: called only where cpu_features() found it.
#include <algorithm>
#include <cstring>

#include "kernels/cpu/bf16.h"
#include "kernels/cpu/tile_mac_forms.h"

#if defined(TERA_TILE_FORMS_X86)
#include <immintrin.h>

#define TERA_AVX512 __attribute__((target("avx512f,avx512bw,avx512dq,avx512vl,fma")))
#define TERA_AVX512_BF16 __attribute__((target("avx512f,avx512bw,avx512dq,avx512vl,fma,avx512bf16")))

namespace tera::cpu::tile_forms {

namespace {

uint32_t pair_at(const uint16_t* p) {
  uint32_t u;
  std::memcpy(&u, p, sizeof u);
  return u;
}

// C's block (+)= c, the last vector masked.
template <int R, int NV, bool Acc>
TERA_AVX512 inline void store(float* C, int64_t ldc, const __m512 (&c)[R][NV], __mmask16 last) {
  for (int r = 0; r < R; ++r) {
    for (int j = 0; j < NV; ++j) {
      float* p = C + r * ldc + 16 * j;
      const __mmask16 m = j == NV - 1 ? last : static_cast<__mmask16>(0xffff);
      _mm512_mask_storeu_ps(p, m, Acc ? _mm512_add_ps(_mm512_maskz_loadu_ps(m, p), c[r][j]) : c[r][j]);
    }
  }
}

template <int R, int NV, bool Acc>
TERA_AVX512 void f32_block(float* C, int64_t ldc, const float* A, int64_t lda, const float* B, int64_t ldb, int64_t K,
                           __mmask16 last) {
  __m512 c[R][NV];
  for (int r = 0; r < R; ++r) {
    for (int j = 0; j < NV; ++j) c[r][j] = _mm512_setzero_ps();
  }
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
  store<R, NV, Acc>(C, ldc, c, last);
}

// bf16: K counts pairs; B's row k is N 32-bit pairs.
template <int R, int NV, bool Acc>
TERA_AVX512 void widened_block(float* C, int64_t ldc, const uint16_t* A, int64_t lda, const uint16_t* B, int64_t ldb,
                               int64_t K, __mmask16 last) {
  __m512 c[R][NV];
  for (int r = 0; r < R; ++r) {
    for (int j = 0; j < NV; ++j) c[r][j] = _mm512_setzero_ps();
  }
  const __m512i hi = _mm512_set1_epi32(static_cast<int>(0xffff0000u));
  for (int64_t k = 0; k < K; ++k) {
    __m512 b0[NV], b1[NV];
    for (int j = 0; j < NV; ++j) {
      const uint16_t* p = B + 2 * (k * ldb + 16 * j);
      const __m512i b = j == NV - 1 ? _mm512_maskz_loadu_epi32(last, p) : _mm512_loadu_si512(p);
      // (the zero-masked shift: GCC 12 warns on _mm512_slli_epi32's undefined source)
      b0[j] = _mm512_castsi512_ps(_mm512_maskz_slli_epi32(static_cast<__mmask16>(0xffff), b, 16));
      b1[j] = _mm512_castsi512_ps(_mm512_and_si512(b, hi));
    }
    for (int r = 0; r < R; ++r) {
      const uint32_t pair = pair_at(A + r * lda + 2 * k);
      const __m512 a0 = _mm512_set1_ps(from_bf16(static_cast<uint16_t>(pair & 0xffffu)));
      const __m512 a1 = _mm512_set1_ps(from_bf16(static_cast<uint16_t>(pair >> 16)));
      for (int j = 0; j < NV; ++j) c[r][j] = _mm512_fmadd_ps(a1, b1[j], _mm512_fmadd_ps(a0, b0[j], c[r][j]));
    }
  }
  store<R, NV, Acc>(C, ldc, c, last);
}

template <int R, int NV, bool Acc>
TERA_AVX512_BF16 void dot_block(float* C, int64_t ldc, const uint16_t* A, int64_t lda, const uint16_t* B, int64_t ldb,
                                int64_t K, __mmask16 last) {
  __m512 c[R][NV];
  for (int r = 0; r < R; ++r) {
    for (int j = 0; j < NV; ++j) c[r][j] = _mm512_setzero_ps();
  }
  for (int64_t k = 0; k < K; ++k) {
    __m512bh b[NV];
    for (int j = 0; j < NV; ++j) {
      const uint16_t* p = B + 2 * (k * ldb + 16 * j);
      b[j] = (__m512bh)(j == NV - 1 ? _mm512_maskz_loadu_epi32(last, p) : _mm512_loadu_si512(p));
    }
    for (int r = 0; r < R; ++r) {
      const __m512bh a = (__m512bh)_mm512_set1_epi32(static_cast<int>(pair_at(A + r * lda + 2 * k)));
      for (int j = 0; j < NV; ++j) c[r][j] = _mm512_dpbf16_ps(c[r][j], a, b[j]);
    }
  }
  store<R, NV, Acc>(C, ldc, c, last);
}

template <typename In>
using BlockFn = void (*)(float*, int64_t, const In*, int64_t, const In*, int64_t, int64_t, __mmask16);

// The block functions of one kind by [rows - 1][vectors - 1].
template <typename In, template <int, int, bool> class Kind, bool Acc>
struct Blocks {
  static constexpr BlockFn<In> fn[4][4] = {
      {Kind<1, 1, Acc>::f, Kind<1, 2, Acc>::f, Kind<1, 3, Acc>::f, Kind<1, 4, Acc>::f},
      {Kind<2, 1, Acc>::f, Kind<2, 2, Acc>::f, Kind<2, 3, Acc>::f, Kind<2, 4, Acc>::f},
      {Kind<3, 1, Acc>::f, Kind<3, 2, Acc>::f, Kind<3, 3, Acc>::f, Kind<3, 4, Acc>::f},
      {Kind<4, 1, Acc>::f, Kind<4, 2, Acc>::f, Kind<4, 3, Acc>::f, Kind<4, 4, Acc>::f}};
};
template <int R, int NV, bool Acc>
struct F32 {
  static constexpr BlockFn<float> f = f32_block<R, NV, Acc>;
};
template <int R, int NV, bool Acc>
struct Widened {
  static constexpr BlockFn<uint16_t> f = widened_block<R, NV, Acc>;
};
template <int R, int NV, bool Acc>
struct Dot {
  static constexpr BlockFn<uint16_t> f = dot_block<R, NV, Acc>;
};

// Walks C in blocks of 4 rows x 64 columns; b_col: storage elements of B
// per column (fp32 1, bf16 pairs 2).
template <typename In, template <int, int, bool> class Kind>
void drive(float* C, int64_t ldc, const In* A, int64_t lda, const In* B, int64_t ldb, int64_t M, int64_t N,
           int64_t K, bool accumulate) {
  constexpr int64_t b_col = sizeof(In) == 4 ? 1 : 2;
  for (int64_t n0 = 0; n0 < N; n0 += 64) {
    const int64_t cols = std::min<int64_t>(64, N - n0);
    const int nv = static_cast<int>((cols + 15) / 16);
    const int64_t rem = cols - 16 * (nv - 1);
    const __mmask16 last = static_cast<__mmask16>(rem == 16 ? 0xffffu : (1u << rem) - 1u);
    for (int64_t m0 = 0; m0 < M; m0 += 4) {
      const int r = static_cast<int>(std::min<int64_t>(4, M - m0));
      const BlockFn<In> f = accumulate ? Blocks<In, Kind, true>::fn[r - 1][nv - 1] : Blocks<In, Kind, false>::fn[r - 1][nv - 1];
      f(C + m0 * ldc + n0, ldc, A + m0 * lda, lda, B + n0 * b_col, ldb, K, last);
    }
  }
}

}  // namespace

void avx512_f32(float* C, int64_t ldc, const float* A, int64_t lda, const float* B, int64_t ldb, int64_t M,
                int64_t N, int64_t K) {
  drive<float, F32>(C, ldc, A, lda, B, ldb, M, N, K, true);
}
void avx512_bf16_widened(float* C, int64_t ldc, const uint16_t* A, int64_t lda, const uint16_t* B, int64_t ldb,
                         int64_t M, int64_t N, int64_t K2, bool accumulate) {
  drive<uint16_t, Widened>(C, ldc, A, lda, B, ldb, M, N, K2, accumulate);
}
void avx512_bf16_dot(float* C, int64_t ldc, const uint16_t* A, int64_t lda, const uint16_t* B, int64_t ldb,
                     int64_t M, int64_t N, int64_t K2, bool accumulate) {
  drive<uint16_t, Dot>(C, ldc, A, lda, B, ldb, M, N, K2, accumulate);
}

}  // namespace tera::cpu::tile_forms

#endif  // TERA_TILE_FORMS_X86
