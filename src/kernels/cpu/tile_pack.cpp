// transpose32 (tile_pack.h): the AVX-512 form where the CPU has it, else
// the portable loop; the portable loop also does the AVX-512 form's edges.
// And whether the fp32 packs take their AVX512-BF16 form.
#include <cstring>

#include "kernels/cpu/cpu_features.h"
#include "kernels/cpu/tile_pack.h"

namespace tera::cpu {

void transpose32_portable(void* dst, int64_t ldd, const void* src, int64_t lds, int64_t rows, int64_t cols,
                          int64_t rb, int64_t cb) {
  auto* d = static_cast<unsigned char*>(dst);
  const auto* s = static_cast<const unsigned char*>(src);
  for (int64_t r = 0; r < rows; ++r) {
    for (int64_t c = r < rb ? cb : 0; c < cols; ++c) std::memcpy(d + 4 * (c * ldd + r), s + 4 * (r * lds + c), 4);
  }
}

bool pack_f32_by_avx512bf16() { return cpu_features().avx512_bf16; }

void transpose32(void* dst, int64_t ldd, const void* src, int64_t lds, int64_t rows, int64_t cols) {
#if defined(__x86_64__)
  if (cpu_features().avx512) return transpose32_avx512(dst, ldd, src, lds, rows, cols);
#endif
  transpose32_portable(dst, ldd, src, lds, rows, cols, 0, 0);
}

}  // namespace tera::cpu
