// The portable GEMM: C[M,N] = alpha * op(A)[M,K] op(B)[K,N] + beta * C,
// row-major (op(A) = A^T when trans_a: A then holds K rows of lda), in plain
// C++ that the compiler vectorizes. It is the CPU backend's GEMM only in a
// build without oneDNN and OpenBLAS (TERA_GPU_NODE: a GPU node has neither);
// everywhere else it is compiled and tested against the libraries
// (tests/kernels/test_gemm_portable.cpp) so that build stays right.
// beta == 0 overwrites C (NaN there does not propagate), as BLAS does.
#pragma once

#include <cstdint>

namespace tera::cpu {

template <typename T>
void gemm_portable(bool trans_a, bool trans_b, int64_t M, int64_t N, int64_t K, T alpha, const T* A, int64_t lda,
                   const T* B, int64_t ldb, T beta, T* C, int64_t ldc);

}  // namespace tera::cpu
