// The AVX-512 forms of tile_pack.h: transpose32 in whole 16 x 16 blocks of
// 32-bit elements through registers (unpack 32, unpack 64, then two 128-bit
// lane shuffles; the rows and columns past the last whole block go through
// the portable loop), and with AVX512-BF16 the fp32 packs, rounded 32 values
// at a time by vcvtne2ps2bf16 (pairs interleaved by one vpermw). Compiled
// by target attributes, called only where cpu_features() found them.
#include <cstring>

#include "kernels/cpu/tile_pack.h"

#if defined(__x86_64__)
#include <immintrin.h>

#define TERA_AVX512 __attribute__((target("avx512f,avx512bw,avx512dq,avx512vl")))
#define TERA_AVX512_BF16 __attribute__((target("avx512f,avx512bw,avx512dq,avx512vl,avx512bf16")))

namespace tera::cpu {

namespace {

// The unpacks and lane shuffles zero-masked with every lane kept: GCC 12
// warns on the unmasked intrinsics' undefined pass-through source.
constexpr __mmask16 kAll32 = 0xffff;
constexpr __mmask8 kAll64 = 0xff;
TERA_AVX512 inline __m512i lo32(__m512i a, __m512i b) { return _mm512_maskz_unpacklo_epi32(kAll32, a, b); }
TERA_AVX512 inline __m512i hi32(__m512i a, __m512i b) { return _mm512_maskz_unpackhi_epi32(kAll32, a, b); }
TERA_AVX512 inline __m512i lo64(__m512i a, __m512i b) { return _mm512_maskz_unpacklo_epi64(kAll64, a, b); }
TERA_AVX512 inline __m512i hi64(__m512i a, __m512i b) { return _mm512_maskz_unpackhi_epi64(kAll64, a, b); }
template <int imm>
TERA_AVX512 inline __m512i lanes(__m512i a, __m512i b) { return _mm512_maskz_shuffle_i32x4(kAll32, a, b, imm); }

// dst rows c (ldd) = src columns c of 16 rows (lds), in 32-bit elements.
TERA_AVX512 void block16(uint32_t* dst, int64_t ldd, const uint32_t* src, int64_t lds) {
  __m512i r[16], t[16];
  for (int i = 0; i < 16; ++i) r[i] = _mm512_loadu_si512(src + i * lds);
  // Within each 128-bit lane l (columns 4l..4l+3): pairs of rows interleaved...
  for (int i = 0; i < 8; ++i) {
    t[2 * i] = lo32(r[2 * i], r[2 * i + 1]);      // a0 b0 a1 b1
    t[2 * i + 1] = hi32(r[2 * i], r[2 * i + 1]);  // a2 b2 a3 b3
  }
  // ...then quadruples: r[4q + k] holds rows 4q..4q+3 of column 4l + k in lane l.
  for (int q = 0; q < 4; ++q) {
    r[4 * q] = lo64(t[4 * q], t[4 * q + 2]);
    r[4 * q + 1] = hi64(t[4 * q], t[4 * q + 2]);
    r[4 * q + 2] = lo64(t[4 * q + 1], t[4 * q + 3]);
    r[4 * q + 3] = hi64(t[4 * q + 1], t[4 * q + 3]);
  }
  // Lanes: t[k] = rows 0-3 and 4-7 (lanes 0, 2 of r[k], r[4 + k]: columns k, 8 + k), t[4 + k] lanes 1, 3
  // (columns 4 + k, 12 + k); likewise rows 8-15 into t[8 + ...].
  for (int k = 0; k < 4; ++k) {
    t[k] = lanes<0x88>(r[k], r[4 + k]);
    t[4 + k] = lanes<0xdd>(r[k], r[4 + k]);
    t[8 + k] = lanes<0x88>(r[8 + k], r[12 + k]);
    t[12 + k] = lanes<0xdd>(r[8 + k], r[12 + k]);
  }
  // t[k]: [col k rows 0-3, col 8+k rows 0-3, col k rows 4-7, col 8+k rows 4-7]; with t[8 + k]:
  // column k = lanes 0, 2 of t[k] then lanes 0, 2 of t[8 + k].
  for (int k = 0; k < 4; ++k) {
    for (int half = 0; half < 2; ++half) {
      const int c = 4 * half + k;  // t[c]: columns c and 8 + c
      _mm512_storeu_si512(dst + c * ldd, lanes<0x88>(t[c], t[8 + c]));
      _mm512_storeu_si512(dst + (8 + c) * ldd, lanes<0xdd>(t[c], t[8 + c]));
    }
  }
}

}  // namespace

void transpose32_avx512(void* dst, int64_t ldd, const void* src, int64_t lds, int64_t rows, int64_t cols) {
  const int64_t rb = rows / 16 * 16, cb = cols / 16 * 16;
  auto* d = static_cast<uint32_t*>(dst);
  const auto* s = static_cast<const uint32_t*>(src);  // only as the address of vector loads
  for (int64_t r = 0; r < rb; r += 16) {
    for (int64_t c = 0; c < cb; c += 16) block16(d + c * ldd + r, ldd, s + r * lds + c, lds);
  }
  transpose32_portable(dst, ldd, src, lds, rows, cols, rb, cb);
}

namespace {

// The first n lanes (none for n <= 0, all for n >= the width).
TERA_AVX512_BF16 inline __mmask16 lanes16(int64_t n) {
  return n >= 16 ? static_cast<__mmask16>(0xffff) : n <= 0 ? 0 : static_cast<__mmask16>((1u << n) - 1u);
}
TERA_AVX512_BF16 inline __mmask32 lanes32(int64_t n) {
  return n >= 32 ? static_cast<__mmask32>(0xffffffffu) : n <= 0 ? 0 : static_cast<__mmask32>((1ull << n) - 1u);
}

}  // namespace

TERA_AVX512_BF16 void pack_rows_f32_avx512bf16(uint16_t* dst, int64_t ldd, const float* src, int64_t lds, int64_t rows, int64_t cols) {
  for (int64_t r = 0; r < rows; ++r) {
    const float* s = src + r * lds;
    uint16_t* d = dst + r * ldd;
    for (int64_t c = 0; c < ldd; c += 32) {  // columns past cols (up to ldd) become zeros
      const __m512 lo = _mm512_maskz_loadu_ps(lanes16(cols - c), s + c);
      const __m512 hi = _mm512_maskz_loadu_ps(lanes16(cols - c - 16), s + c + 16);
      _mm512_mask_storeu_epi16(d + c, lanes32(ldd - c), (__m512i)_mm512_cvtne2ps_pbh(hi, lo));
    }
  }
}

TERA_AVX512_BF16 void pack_row_pairs_f32_avx512bf16(uint16_t* dst, int64_t ldb, const float* src, int64_t lds, int64_t rows,
                                   int64_t cols, int64_t k2) {
  // vcvtne2ps2bf16(b, a) holds a0..a15 then b0..b15; this interleaves them.
  alignas(64) static constexpr uint16_t kInterleave[32] = {0, 16, 1, 17, 2,  18, 3,  19, 4,  20, 5,  21, 6,  22, 7,  23,
                                                           8, 24, 9, 25, 10, 26, 11, 27, 12, 28, 13, 29, 14, 30, 15, 31};
  const __m512i order = _mm512_load_si512(kInterleave);
  for (int64_t p = 0; p < k2; ++p) {
    const int64_t n0 = 2 * p < rows ? cols : 0, n1 = 2 * p + 1 < rows ? cols : 0;  // the rows that exist
    const float* s0 = src + 2 * p * lds;
    const float* s1 = s0 + lds;
    uint16_t* d = dst + 2 * p * ldb;
    for (int64_t c = 0; c < cols; c += 16) {
      const __m512 a = _mm512_maskz_loadu_ps(lanes16(n0 - c), s0 + c);
      const __m512 b = _mm512_maskz_loadu_ps(lanes16(n1 - c), s1 + c);
      const __m512i both = (__m512i)_mm512_cvtne2ps_pbh(b, a);
      _mm512_mask_storeu_epi16(d + 2 * c, lanes32(2 * (cols - c)), _mm512_permutexvar_epi16(order, both));
    }
  }
}

}  // namespace tera::cpu

#endif
