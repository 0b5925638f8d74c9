// Linear layers with bf16 GEMM inputs and fp32 everything else (ops.h:
// LinearForwardBf16Fn). The input x arrives in bf16 (the model keeps the
// inputs of its linear layers so, or rounds them once); the weights arrive
// in bf16 (the parameter memory keeps that copy, refreshed after each
// optimizer step). Products run on gemm_bf16 (oneDNN's bf16 matmul, fp32
// accumulation and output). Around the products, one pass over each
// activation: the forward's bias is added in the GEMM's epilogue (y written
// once); the backward rounds dy to bf16 into the caller's cast workspace and
// sums its columns for db in the same pass (dy read once before the GEMMs).
#include <algorithm>
#include <vector>

#include "kernels/cpu/bf16.h"
#include "kernels/cpu/cpu_ops.h"

namespace tera::cpu {

void cast_to_bf16_and_add_column_sums(uint16_t* dst, float* db, const float* src, int64_t N, int64_t O) {
  // Blocks of kRows rows to the threads, each streaming through its rows
  // once (cast, and summed into the block's partial row); then the partial
  // rows summed in block order. The order of the sums depends on N only,
  // not on the thread count.
  constexpr int64_t kRows = 128;
  const int64_t blocks = (N + kRows - 1) / kRows;
  std::vector<float> partial(static_cast<size_t>(blocks * O));  // [blocks, O]
#pragma omp parallel for schedule(static)
  for (int64_t k = 0; k < blocks; ++k) {
    float* sum = partial.data() + k * O;
    std::fill(sum, sum + O, 0.0f);
    for (int64_t n = k * kRows; n < std::min(N, (k + 1) * kRows); ++n) {
      const float* row = src + n * O;
      uint16_t* out = dst + n * O;
#pragma omp simd
      for (int64_t o = 0; o < O; ++o) {
        out[o] = to_bf16(row[o]);
        sum[o] += row[o];
      }
    }
  }
#pragma omp parallel for schedule(static)
  for (int64_t o = 0; o < O; ++o) {
    float s = 0;
    for (int64_t k = 0; k < blocks; ++k) s += partial[static_cast<size_t>(k * O + o)];
    db[o] += s;
  }
}

void linear_forward_bf16(float* y, const uint16_t* xb, const uint16_t* W, const float* b, int64_t N, int64_t I,
                         int64_t O) {
  // y[N,O] = x[N,I] @ W[O,I]^T (+ b)
  gemm_bf16(false, true, N, O, I, 1.0f, xb, I, W, I, 0.0f, y, O, b);
}

void linear_backward_bf16(float* dx, float* dW, float* db, const float* dy, const uint16_t* xb, const uint16_t* W,
                          int64_t N, int64_t I, int64_t O, bool accumulate_dx, uint16_t* cast) {
  // dx, dW and db each skipped when null (ops.h). db is summed in the cast's
  // pass whenever it is given, so its bits do not depend on dx or dW.
  uint16_t* dyb = cast;  // [N, O]
  if (db != nullptr) {
    cast_to_bf16_and_add_column_sums(dyb, db, dy, N, O);
  } else if (dx != nullptr || dW != nullptr) {
    cast_to_bf16(dyb, dy, N * O);
  }
  // dx[N,I] (+)= bf16(dy) @ W[O,I]
  if (dx != nullptr) gemm_bf16(false, false, N, I, O, 1.0f, dyb, O, W, I, accumulate_dx ? 1.0f : 0.0f, dx, I);
  // dW[O,I] += bf16(dy)^T @ x
  if (dW != nullptr) gemm_bf16(true, false, O, I, N, 1.0f, dyb, O, xb, I, 1.0f, dW, I);
}

}  // namespace tera::cpu
