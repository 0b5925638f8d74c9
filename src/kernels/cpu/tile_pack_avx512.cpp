// The AVX-512 form of transpose32 (tile_pack.h): whole 16 x 16 blocks of
// 32-bit elements through registers (unpack 32, unpack 64, then two 128-bit
// lane shuffles); the rows and columns past the last whole block go
// through the portable loop. Compiled for AVX-512 by target attributes,
// called only where cpu_features() found it.
#include <cstring>

#include "kernels/cpu/tile_pack.h"

#if defined(__x86_64__)
#include <immintrin.h>

#define TERA_AVX512 __attribute__((target("avx512f,avx512bw,avx512dq,avx512vl")))

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

}  // namespace tera::cpu

#endif
