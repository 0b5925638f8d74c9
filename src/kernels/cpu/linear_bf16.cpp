// Linear layers with bf16 GEMM inputs and fp32 everything else (ops.h:
// LinearForwardBf16Fn). The input x arrives in bf16 (the model keeps the
// inputs of its linear layers so, or rounds them once); the gradient dy is
// rounded to bf16 into the caller's cast workspace just before the backward
// products (a pass over N*O values against their 4*N*I*O FLOPs); the weights
// arrive in bf16 (the parameter memory keeps that copy, refreshed after each
// optimizer step). Products run on gemm_bf16 (oneDNN's bf16 matmul, fp32
// accumulation and output).
#include "kernels/cpu/cpu_ops.h"

namespace tera::cpu {

void linear_forward_bf16(float* y, const uint16_t* xb, const uint16_t* W, const float* b, int64_t N, int64_t I,
                         int64_t O) {
  // y[N,O] = x[N,I] @ W[O,I]^T (+ b)
  if (b != nullptr) fill_rows(y, b, N, O);
  gemm_bf16(false, true, N, O, I, 1.0f, xb, I, W, I, b != nullptr ? 1.0f : 0.0f, y, O);
}

void linear_backward_bf16(float* dx, float* dW, float* db, const float* dy, const uint16_t* xb, const uint16_t* W,
                          int64_t N, int64_t I, int64_t O, bool accumulate_dx, uint16_t* cast) {
  uint16_t* dyb = cast;  // [N, O]
  cast_to_bf16(dyb, dy, N * O);
  // dx[N,I] (+)= bf16(dy) @ W[O,I]
  if (dx != nullptr) gemm_bf16(false, false, N, I, O, 1.0f, dyb, O, W, I, accumulate_dx ? 1.0f : 0.0f, dx, I);
  // dW[O,I] += bf16(dy)^T @ x
  gemm_bf16(true, false, O, I, N, 1.0f, dyb, O, xb, I, 1.0f, dW, I);
  if (db != nullptr) add_column_sums(db, dy, N, O);
}

}  // namespace tera::cpu
