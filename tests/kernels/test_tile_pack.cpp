// The operand packing of the CPU bf16 flash attention (tile_pack.h) against
// the definitions element by element: the transposes in both forms this CPU
// may run (portable, AVX-512: whole 16 x 16 blocks plus portable edges) on
// sizes with and without edges, and each pack with its zero padding, from
// fp32 (rounded) and bf16 sources, with odd strides and odd lengths; the
// fp32 packs in their portable and (where the CPU has it) AVX512-BF16 forms,
// which rounds as to_bf16 but packs a subnormal as zero.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <random>
#include <vector>

#include "kernels/cpu/bf16.h"
#include "kernels/cpu/cpu_features.h"
#include "kernels/cpu/tile_pack.h"

namespace tera::cpu {
namespace {

struct Shape {
  int64_t rows, cols;
};
constexpr Shape kShapes[] = {{1, 1}, {16, 16}, {64, 32}, {32, 64}, {17, 33}, {5, 48}, {48, 5}, {67, 35}};

std::vector<uint32_t> counting(size_t n) {
  std::vector<uint32_t> v(n);
  for (size_t i = 0; i < n; ++i) v[i] = static_cast<uint32_t>(i * 2654435761u);
  return v;
}

TEST(TilePack, Transpose32EveryForm) {
  for (auto [rows, cols] : kShapes) {
    const int64_t lds = cols + 3, ldd = rows + 5;
    const std::vector<uint32_t> src = counting(static_cast<size_t>(rows * lds));
    std::vector<uint32_t> want(static_cast<size_t>(cols * ldd), 7u);
    for (int64_t r = 0; r < rows; ++r) {
      for (int64_t c = 0; c < cols; ++c) want[c * ldd + r] = src[r * lds + c];
    }
    std::vector<uint32_t> got(want.size(), 7u);
    transpose32_portable(got.data(), ldd, src.data(), lds, rows, cols, 0, 0);
    EXPECT_EQ(got, want) << "portable " << rows << "x" << cols;
    if (cpu_features().avx512) {
      std::fill(got.begin(), got.end(), 7u);
      transpose32_avx512(got.data(), ldd, src.data(), lds, rows, cols);
      EXPECT_EQ(got, want) << "avx512 " << rows << "x" << cols;
    }
    std::fill(got.begin(), got.end(), 7u);
    transpose32(got.data(), ldd, src.data(), lds, rows, cols);
    EXPECT_EQ(got, want) << "dispatched " << rows << "x" << cols;
  }
}

template <typename S>
std::vector<S> values(size_t n, unsigned seed) {
  std::mt19937 gen(seed);
  std::normal_distribution<float> d;
  std::vector<S> v(n);
  for (auto& x : v) {
    if constexpr (sizeof(S) == 2) {
      x = to_bf16(d(gen));
    } else {
      x = d(gen);
    }
  }
  return v;
}

template <typename S>
uint16_t as_bf16(S v) {
  if constexpr (sizeof(S) == 2) {
    return v;
  } else {
    return to_bf16(v);
  }
}

template <typename S>
void check_packs(int64_t rows, int64_t cols, int64_t lds) {
  const std::vector<S> src = values<S>(static_cast<size_t>(rows * lds), static_cast<unsigned>(rows * 131 + cols));
  auto at = [&](int64_t r, int64_t c) { return as_bf16(src[r * lds + c]); };
  const std::string where = std::to_string(rows) + "x" + std::to_string(cols) + " lds " + std::to_string(lds);
  {  // A = src, padded to ld
    const int64_t ld = (cols + 31) / 32 * 32;
    std::vector<uint16_t> got(static_cast<size_t>(rows * ld), 0xdead);
    pack_rows(got.data(), ld, src.data(), lds, rows, cols);
    for (int64_t r = 0; r < rows; ++r) {
      for (int64_t c = 0; c < ld; ++c) ASSERT_EQ(got[r * ld + c], c < cols ? at(r, c) : 0) << "pack_rows " << where;
    }
  }
  {  // A = src^T, zero-padded to `padded` (even), ld wider (untouched past padded)
    const int64_t padded = (rows + 31) / 32 * 32, ld = padded + 6;
    std::vector<uint16_t> got(static_cast<size_t>(cols * ld), 0xdead), pairs(static_cast<size_t>((rows + 1) / 2 * cols * 2));
    pack_transposed_rows(got.data(), ld, src.data(), lds, rows, cols, padded, pairs.data());
    for (int64_t c = 0; c < cols; ++c) {
      for (int64_t r = 0; r < ld; ++r) {
        const uint16_t want = r >= padded ? 0xdead : r < rows ? at(r, c) : 0;
        ASSERT_EQ(got[c * ld + r], want) << "pack_transposed_rows " << where;
      }
    }
  }
  {  // B contracted over rows: k2 pair rows of cols pairs (ld ldb; pairs past cols untouched)
    const int64_t k2 = (rows + 31) / 32 * 16, ldb = cols + 5;
    std::vector<uint16_t> got(static_cast<size_t>(2 * k2 * ldb), 0xdead);
    pack_row_pairs(got.data(), ldb, src.data(), lds, rows, cols, k2);
    for (int64_t p = 0; p < k2; ++p) {
      for (int64_t c = 0; c < ldb; ++c) {
        for (int64_t j = 0; j < 2; ++j) {
          const int64_t r = 2 * p + j;
          const uint16_t want = c >= cols ? 0xdead : r < rows ? at(r, c) : 0;
          ASSERT_EQ(got[2 * (p * ldb + c) + j], want) << "pack_row_pairs " << where;
        }
      }
    }
  }
  if constexpr (sizeof(S) == 2) {  // B contracted over columns: k2 pair rows of rows pairs (ld ldb)
    const int64_t k2 = (cols + 31) / 32 * 16, ldb = rows + 3;
    std::vector<uint16_t> got(static_cast<size_t>(2 * k2 * ldb), 0xdead);
    pack_transposed_pairs(got.data(), ldb, src.data(), lds, rows, cols, k2);
    for (int64_t p = 0; p < k2; ++p) {
      for (int64_t r = 0; r < ldb; ++r) {
        for (int64_t j = 0; j < 2; ++j) {
          const int64_t c = 2 * p + j;
          const uint16_t want = r >= rows ? 0xdead : c < cols ? at(r, c) : 0;
          ASSERT_EQ(got[2 * (p * ldb + r) + j], want) << "pack_transposed_pairs " << where;
        }
      }
    }
  }
}

// The fp32 packs' two forms on the same values, with a subnormal, a NaN,
// ties and values that round up past a power of two.
TEST(TilePack, Fp32PacksInEveryForm) {
  const int64_t rows = 7, cols = 37, lds = 40, ld = 64, k2 = 16;
  std::vector<float> src = values<float>(static_cast<size_t>(rows * lds), 5);
  src[3] = 1e-40f;                 // subnormal
  src[4] = 1.00390625f;            // a tie: stays 1
  src[5] = 1.01171875f;            // a tie: rounds up
  src[6] = 0x1.ffffffp0f;          // rounds up to 2
  src[lds + 1] = NAN;
  src[2 * lds] = -3e38f;
  auto want = [&](int64_t r, int64_t c) -> uint16_t {
    const float v = src[static_cast<size_t>(r * lds + c)];
    return std::fpclassify(v) == FP_SUBNORMAL ? (std::signbit(v) ? 0x8000 : 0) : to_bf16(v);
  };
  std::vector<uint16_t> a(static_cast<size_t>(rows * ld)), b(static_cast<size_t>(2 * k2 * cols));
  pack_rows_portable(a.data(), ld, src.data(), lds, rows, cols);
  pack_row_pairs_portable(b.data(), cols, src.data(), lds, rows, cols, k2);
  for (int64_t r = 0; r < rows; ++r) {  // the portable form: to_bf16 everywhere, a subnormal's bf16 kept
    for (int64_t c = 0; c < cols; ++c) {
      const float v = src[static_cast<size_t>(r * lds + c)];
      if (std::isnan(v)) continue;
      ASSERT_EQ(a[static_cast<size_t>(r * ld + c)], to_bf16(v)) << "portable rows at " << r << ", " << c;
      ASSERT_EQ(b[static_cast<size_t>(2 * ((r / 2) * cols + c) + r % 2)], to_bf16(v)) << "portable pairs at " << r << ", " << c;
    }
  }
  EXPECT_NE(a[3], 0) << "the portable form keeps a subnormal's bf16";
  if (!cpu_features().avx512_bf16) GTEST_SKIP() << "no AVX512-BF16 here: the portable form only";
  std::fill(a.begin(), a.end(), 0xdead);
  std::fill(b.begin(), b.end(), 0xdead);
  pack_rows_f32_avx512bf16(a.data(), ld, src.data(), lds, rows, cols);
  pack_row_pairs_f32_avx512bf16(b.data(), cols, src.data(), lds, rows, cols, k2);
  for (int64_t r = 0; r < rows; ++r) {
    for (int64_t c = 0; c < ld; ++c) {
      const uint16_t got = a[static_cast<size_t>(r * ld + c)];
      if (c < cols && std::isnan(src[static_cast<size_t>(r * lds + c)])) {
        EXPECT_TRUE(std::isnan(from_bf16(got)));
        continue;
      }
      ASSERT_EQ(got, c < cols ? want(r, c) : 0) << "rows form at " << r << ", " << c;
    }
  }
  for (int64_t p = 0; p < k2; ++p) {
    for (int64_t c = 0; c < cols; ++c) {
      for (int64_t j = 0; j < 2; ++j) {
        const int64_t r = 2 * p + j;
        const uint16_t got = b[static_cast<size_t>(2 * (p * cols + c) + j)];
        if (r < rows && std::isnan(src[static_cast<size_t>(r * lds + c)])) {
          EXPECT_TRUE(std::isnan(from_bf16(got)));
          continue;
        }
        ASSERT_EQ(got, r < rows ? want(r, c) : 0) << "pairs form at " << r << ", " << c;
      }
    }
  }
}

TEST(TilePack, PacksMatchTheirDefinitions) {
  for (auto [rows, cols] : kShapes) {
    for (int64_t extra : {0, 2, 3}) {  // lds = cols, wider, and odd where cols is even
      check_packs<float>(rows, cols, cols + extra);
      check_packs<uint16_t>(rows, cols, cols + extra);
    }
  }
}

}  // namespace
}  // namespace tera::cpu
