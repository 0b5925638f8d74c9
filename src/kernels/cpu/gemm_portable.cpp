// The portable GEMM (gemm_portable.h). Blocked for the caches: a kKc x kNc
// panel of op(B) is packed row-major (shared by the threads), each thread
// packs kMr rows of alpha * op(A) for that depth, and a kMr x kNr register
// tile of C accumulates over the panel's depth before it is added to C. The
// fixed-size inner loops are what GCC turns into vector FMAs.
#include "kernels/cpu/gemm_portable.h"

#include <algorithm>
#include <memory>

namespace tera::cpu {

namespace {

constexpr int64_t kKc = 256;  // depth of a packed panel
constexpr int64_t kNc = 512;  // columns of a packed panel
constexpr int64_t kMr = 4;    // rows of the register tile

// Columns of the register tile: 4 x 64 bytes per row (4 AVX-512 registers).
template <typename T>
constexpr int64_t kNr = 256 / static_cast<int64_t>(sizeof(T));

// acc[r][j] = sum over kk < kc of a[r * kKc + kk] * b[kk * kNc + j], added to C.
template <typename T, int64_t kRows, int64_t kCols>
void tile_fixed(const T* a, const T* b, int64_t kc, T* c, int64_t ldc) {
  T acc[kRows][kCols] = {};
  for (int64_t kk = 0; kk < kc; ++kk) {
    const T* brow = b + kk * kNc;
    for (int64_t r = 0; r < kRows; ++r) {
      const T av = a[r * kKc + kk];
      for (int64_t j = 0; j < kCols; ++j) acc[r][j] += av * brow[j];
    }
  }
  for (int64_t r = 0; r < kRows; ++r) {
    for (int64_t j = 0; j < kCols; ++j) c[r * ldc + j] += acc[r][j];
  }
}

// The same for a tile at the matrix's edge (rows <= kMr, cols <= kNr).
template <typename T>
void tile_edge(const T* a, const T* b, int64_t kc, T* c, int64_t ldc, int64_t rows, int64_t cols) {
  for (int64_t r = 0; r < rows; ++r) {
    for (int64_t j = 0; j < cols; ++j) {
      T s = 0;
      for (int64_t kk = 0; kk < kc; ++kk) s += a[r * kKc + kk] * b[kk * kNc + j];
      c[r * ldc + j] += s;
    }
  }
}

}  // namespace

template <typename T>
void gemm_portable(bool trans_a, bool trans_b, int64_t M, int64_t N, int64_t K, T alpha, const T* A, int64_t lda,
                   const T* B, int64_t ldb, T beta, T* C, int64_t ldc) {
  if (M <= 0 || N <= 0) return;
#pragma omp parallel for schedule(static)
  for (int64_t i = 0; i < M; ++i) {
    T* row = C + i * ldc;
    if (beta == T(0)) {
      std::fill(row, row + N, T(0));
    } else if (beta != T(1)) {
      for (int64_t j = 0; j < N; ++j) row[j] *= beta;
    }
  }
  if (K <= 0 || alpha == T(0)) return;
  constexpr int64_t nr = kNr<T>;
  // The shared panel, uninitialised (every element read is packed first) and
  // no deeper than K: a small product does not pay for zeroing 512 KB.
  const std::unique_ptr<T[]> bp(new T[static_cast<size_t>(std::min(kKc, K) * kNc)]);
  const int64_t row_blocks = (M + kMr - 1) / kMr;
#pragma omp parallel
  {
    const std::unique_ptr<T[]> ap(new T[static_cast<size_t>(kMr * kKc)]);
    for (int64_t k0 = 0; k0 < K; k0 += kKc) {
      const int64_t kc = std::min(kKc, K - k0);
      for (int64_t n0 = 0; n0 < N; n0 += kNc) {
        const int64_t nc = std::min(kNc, N - n0);
        // bp[kk][j] = op(B)(k0 + kk, n0 + j)
#pragma omp for schedule(static)
        for (int64_t kk = 0; kk < kc; ++kk) {
          T* dst = bp.get() + kk * kNc;
          if (trans_b) {
            for (int64_t j = 0; j < nc; ++j) dst[j] = B[(n0 + j) * ldb + k0 + kk];
          } else {
            std::copy(B + (k0 + kk) * ldb + n0, B + (k0 + kk) * ldb + n0 + nc, dst);
          }
        }
#pragma omp for schedule(static)
        for (int64_t blk = 0; blk < row_blocks; ++blk) {
          const int64_t i0 = blk * kMr, rows = std::min(kMr, M - i0);
          // ap[r][kk] = alpha * op(A)(i0 + r, k0 + kk)
          for (int64_t r = 0; r < rows; ++r) {
            for (int64_t kk = 0; kk < kc; ++kk) {
              const int64_t i = i0 + r, k = k0 + kk;
              ap[r * kKc + kk] = alpha * (trans_a ? A[k * lda + i] : A[i * lda + k]);
            }
          }
          T* c = C + i0 * ldc + n0;
          int64_t j0 = 0;
          if (rows == kMr) {
            for (; j0 + nr <= nc; j0 += nr) tile_fixed<T, kMr, nr>(ap.get(), bp.get() + j0, kc, c + j0, ldc);
          }
          for (; j0 < nc; j0 += nr) {
            tile_edge<T>(ap.get(), bp.get() + j0, kc, c + j0, ldc, rows, std::min(nr, nc - j0));
          }
        }
      }
    }
  }
}

template void gemm_portable<float>(bool, bool, int64_t, int64_t, int64_t, float, const float*, int64_t, const float*,
                                   int64_t, float, float*, int64_t);
template void gemm_portable<double>(bool, bool, int64_t, int64_t, int64_t, double, const double*, int64_t,
                                    const double*, int64_t, double, double*, int64_t);

}  // namespace tera::cpu
