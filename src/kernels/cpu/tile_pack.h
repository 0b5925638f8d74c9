// Packing of tile_mac_bf16's operands (tile_mac.h) from row-major fp32 or
// bf16 sources (S = float or uint16_t), rounding fp32 to bf16 (nearest
// even) as it packs, with the contraction padded by zeros to the length the
// caller asks (a multiple of 32 lets AMX take it in whole tiles):
//
//   pack_rows              A = src[rows, cols]:      dst[r, c], ld ldd >= cols
//   pack_transposed_rows   A = src[rows, cols]^T:    dst[c, r], ld ldd >= padded >= rows
//   pack_row_pairs         B = src[rows, cols]:      k2 pair rows of cols pairs
//                          (ld ldb >= cols), pair (p, c) = (src[2p, c], src[2p+1, c])
//   pack_transposed_pairs  B = src[rows, cols]^T:    k2 pair rows of rows pairs
//                          (ld ldb >= rows), pair (p, r) = (src[r, 2p], src[r, 2p+1])
//
// Entries past the source along the contraction (A's columns up to ld, B's
// pair rows up to k2) are zero, so a padded product adds exact zeros; B's
// pairs past its columns (up to ldb) are left as they were. From fp32 with
// AVX512-BF16, a subnormal value packs as zero (the AMX and AVX512-BF16
// products read subnormal operands as zero anyway). Rows go through plain loops
// over contiguous memory, which the compiler vectorizes; the transposes
// through transpose32 (whole 16 x 16 blocks in AVX-512 registers where the
// CPU has them: tile_pack_avx512.cpp).
#pragma once

#include <cstdint>
#include <cstring>
#include <type_traits>

#include "kernels/cpu/bf16.h"

namespace tera::cpu {

// dst[c * ldd + r] = src[r * lds + c] for r < rows, c < cols: 32-bit
// elements (fp32, or bf16 pairs: read and written as bytes, whatever the
// type stored there), strides in 32-bit elements (tile_pack.cpp).
void transpose32(void* dst, int64_t ldd, const void* src, int64_t lds, int64_t rows, int64_t cols);
// The forms: the portable loop over what lies outside the first rb rows
// and cb columns (rb = cb = 0: everything), and the AVX-512 form.
void transpose32_portable(void* dst, int64_t ldd, const void* src, int64_t lds, int64_t rows, int64_t cols,
                          int64_t rb, int64_t cb);
void transpose32_avx512(void* dst, int64_t ldd, const void* src, int64_t lds, int64_t rows, int64_t cols);
// pack_rows and pack_row_pairs from fp32 with AVX512-BF16 (vcvtne2ps2bf16:
// nearest even like to_bf16, but a subnormal becomes zero, as the bf16 dot
// products and AMX read a subnormal operand anyway); tile_pack_avx512.cpp.
void pack_rows_f32_avx512bf16(uint16_t* dst, int64_t ldd, const float* src, int64_t lds, int64_t rows, int64_t cols);
void pack_row_pairs_f32_avx512bf16(uint16_t* dst, int64_t ldb, const float* src, int64_t lds, int64_t rows,
                                   int64_t cols, int64_t k2);
// Whether this CPU takes them (tile_pack.cpp).
bool pack_f32_by_avx512bf16();

template <typename S>
inline uint16_t bf16_of(S v) {
  if constexpr (std::is_same_v<S, uint16_t>) {
    return v;
  } else {
    return to_bf16(v);
  }
}

// dst[r * ldd + c] = bf16(src[r * lds + c]) for c < cols, 0 for cols <= c < ldd.
template <typename S>
inline void pack_rows_portable(uint16_t* dst, int64_t ldd, const S* src, int64_t lds, int64_t rows, int64_t cols) {
  for (int64_t r = 0; r < rows; ++r) {
    uint16_t* d = dst + r * ldd;
    const S* s = src + r * lds;
    if constexpr (std::is_same_v<S, uint16_t>) {
      std::memcpy(d, s, static_cast<size_t>(cols) * sizeof(uint16_t));
    } else {
#pragma omp simd
      for (int64_t c = 0; c < cols; ++c) d[c] = to_bf16(s[c]);
    }
    for (int64_t c = cols; c < ldd; ++c) d[c] = 0;
  }
}
template <typename S>
inline void pack_rows(uint16_t* dst, int64_t ldd, const S* src, int64_t lds, int64_t rows, int64_t cols) {
  if constexpr (std::is_same_v<S, float>) {
    if (pack_f32_by_avx512bf16()) return pack_rows_f32_avx512bf16(dst, ldd, src, lds, rows, cols);
  }
  pack_rows_portable(dst, ldd, src, lds, rows, cols);
}

// B from src[rows, cols] contracted over its rows: k2 pair rows of cols
// pairs (ld ldb pairs), rows past `rows` zero.
template <typename S>
inline void pack_row_pairs_portable(uint16_t* dst, int64_t ldb, const S* src, int64_t lds, int64_t rows, int64_t cols,
                                    int64_t k2) {
  for (int64_t p = 0; p < k2; ++p) {
    uint16_t* d = dst + 2 * p * ldb;
    const int64_t r0 = 2 * p, r1 = 2 * p + 1;
    if (r1 < rows) {
      const S* s0 = src + r0 * lds;
      const S* s1 = src + r1 * lds;
#pragma omp simd
      for (int64_t c = 0; c < cols; ++c) {
        d[2 * c] = bf16_of(s0[c]);
        d[2 * c + 1] = bf16_of(s1[c]);
      }
    } else if (r0 < rows) {
      const S* s0 = src + r0 * lds;
      for (int64_t c = 0; c < cols; ++c) {
        d[2 * c] = bf16_of(s0[c]);
        d[2 * c + 1] = 0;
      }
    } else {
      std::memset(d, 0, static_cast<size_t>(2 * cols) * sizeof(uint16_t));
    }
  }
}
template <typename S>
inline void pack_row_pairs(uint16_t* dst, int64_t ldb, const S* src, int64_t lds, int64_t rows, int64_t cols,
                           int64_t k2) {
  if constexpr (std::is_same_v<S, float>) {
    if (pack_f32_by_avx512bf16()) return pack_row_pairs_f32_avx512bf16(dst, ldb, src, lds, rows, cols, k2);
  }
  pack_row_pairs_portable(dst, ldb, src, lds, rows, cols, k2);
}

// B from src[rows, cols] (bf16) contracted over its columns: k2 pair rows
// of rows pairs (ld ldb pairs), columns past `cols` zero. With lds even the
// pairs are 32-bit elements of the rows: one transpose.
inline void pack_transposed_pairs(uint16_t* dst, int64_t ldb, const uint16_t* src, int64_t lds, int64_t rows,
                                  int64_t cols, int64_t k2) {
  const int64_t full = cols / 2;  // pairs wholly inside the row
  if (lds % 2 == 0) {
    transpose32(dst, ldb, src, lds / 2, rows, full);
  } else {
    for (int64_t r = 0; r < rows; ++r) {
      for (int64_t p = 0; p < full; ++p) {
        dst[2 * (p * ldb + r)] = src[r * lds + 2 * p];
        dst[2 * (p * ldb + r) + 1] = src[r * lds + 2 * p + 1];
      }
    }
  }
  if (cols % 2 == 1) {
    for (int64_t r = 0; r < rows; ++r) {
      dst[2 * (full * ldb + r)] = src[r * lds + cols - 1];
      dst[2 * (full * ldb + r) + 1] = 0;
    }
  }
  for (int64_t p = (cols + 1) / 2; p < k2; ++p) std::memset(dst + 2 * p * ldb, 0, static_cast<size_t>(2 * rows) * sizeof(uint16_t));
}

// A = src[rows, cols]^T: dst[c * ldd + r] = bf16(src[r * lds + c]) for
// r < rows, zero for rows <= r < padded (even, <= ldd); c < cols. The rows
// are paired first (pairs: scratch of (rows + 1) / 2 * cols pairs), then
// the pairs transposed.
template <typename S>
inline void pack_transposed_rows(uint16_t* dst, int64_t ldd, const S* src, int64_t lds, int64_t rows, int64_t cols,
                                 int64_t padded, uint16_t* pairs) {
  const int64_t k2 = (rows + 1) / 2;
  pack_row_pairs(pairs, cols, src, lds, rows, cols, k2);
  transpose32(dst, ldd / 2, pairs, cols, k2, cols);
  for (int64_t c = 0; c < cols; ++c) {
    for (int64_t r = 2 * k2; r < padded; ++r) dst[c * ldd + r] = 0;
  }
}

}  // namespace tera::cpu
