// GEMM and linear layers. fp32 runs on oneDNN's dnnl_sgemm (row-major; it
// picks its AVX-512/AVX2 kernel from the CPU it runs on); fp64, the reference
// path for tests, on OpenBLAS's cblas_dgemm. A build without those libraries
// (TERA_GPU_NODE) runs both on the portable GEMM (gemm_portable.h).
#if defined(TERA_HAVE_OPENBLAS)
#include <cblas.h>
#endif
#if defined(TERA_HAVE_DNNL)
#include <dnnl.h>
#endif

#include "core/check.h"
#include "kernels/cpu/cpu_ops.h"
#include "kernels/cpu/gemm_portable.h"

namespace tera::cpu {

template <>
void gemm<float>(bool trans_a, bool trans_b, int64_t M, int64_t N, int64_t K, float alpha, const float* A,
                 int64_t lda, const float* B, int64_t ldb, float beta, float* C, int64_t ldc) {
  if (M == 0 || N == 0) return;
#if defined(TERA_HAVE_DNNL)
  const dnnl_status_t st = dnnl_sgemm(trans_a ? 'T' : 'N', trans_b ? 'T' : 'N', M, N, K, alpha, A, lda, B, ldb,
                                      beta, C, ldc);
  TERA_ASSERT(st == dnnl_success, "dnnl_sgemm failed with status " + std::to_string(static_cast<int>(st)));
#else
  gemm_portable<float>(trans_a, trans_b, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc);
#endif
}

template <>
void gemm<double>(bool trans_a, bool trans_b, int64_t M, int64_t N, int64_t K, double alpha, const double* A,
                  int64_t lda, const double* B, int64_t ldb, double beta, double* C, int64_t ldc) {
  if (M == 0 || N == 0) return;
#if defined(TERA_HAVE_OPENBLAS)
  cblas_dgemm(CblasRowMajor, trans_a ? CblasTrans : CblasNoTrans, trans_b ? CblasTrans : CblasNoTrans,
              static_cast<int>(M), static_cast<int>(N), static_cast<int>(K), alpha, A, static_cast<int>(lda), B,
              static_cast<int>(ldb), beta, C, static_cast<int>(ldc));
#else
  gemm_portable<double>(trans_a, trans_b, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc);
#endif
}

const char* gemm_isa_name() {
#if defined(TERA_HAVE_DNNL)
  switch (dnnl_get_effective_cpu_isa()) {
    case dnnl_cpu_isa_sse41: return "sse41";
    case dnnl_cpu_isa_avx: return "avx";
    case dnnl_cpu_isa_avx2: return "avx2";
    case dnnl_cpu_isa_avx2_vnni: return "avx2_vnni";
    case dnnl_cpu_isa_avx512_core: return "avx512_core";
    case dnnl_cpu_isa_avx512_core_vnni: return "avx512_core_vnni";
    case dnnl_cpu_isa_avx512_core_bf16: return "avx512_core_bf16";
    case dnnl_cpu_isa_avx512_core_amx: return "avx512_core_amx";
    default: return "other";
  }
#else
  return "portable C++ (compiler-vectorized; built without oneDNN)";
#endif
}

template <typename T>
void add_column_sums(T* db, const T* dy, int64_t N, int64_t O) {
  // db[O] += column sums of dy[N,O]; parallel over column blocks, rows summed in order.
  constexpr int64_t kBlock = 256;
#pragma omp parallel for schedule(static)
  for (int64_t o0 = 0; o0 < O; o0 += kBlock) {
    const int64_t o1 = o0 + kBlock < O ? o0 + kBlock : O;
    for (int64_t n = 0; n < N; ++n) {
      const T* row = dy + n * O;
#pragma omp simd
      for (int64_t o = o0; o < o1; ++o) db[o] += row[o];
    }
  }
}

template <typename T>
void fill_rows(T* y, const T* b, int64_t N, int64_t O) {
#pragma omp parallel for schedule(static)
  for (int64_t n = 0; n < N; ++n) {
    T* row = y + n * O;
#pragma omp simd
    for (int64_t o = 0; o < O; ++o) row[o] = b[o];
  }
}

template <typename T>
void linear_forward(T* y, const T* x, const T* W, const T* b, int64_t N, int64_t I, int64_t O) {
  // y[N,O] = x[N,I] @ W[O,I]^T (+ b)
  if (b != nullptr) fill_rows(y, b, N, O);
  gemm<T>(false, true, N, O, I, T(1), x, I, W, I, b != nullptr ? T(1) : T(0), y, O);
}

template <typename T>
void linear_backward(T* dx, T* dW, T* db, const T* dy, const T* x, const T* W, int64_t N, int64_t I, int64_t O,
                     bool accumulate_dx) {
  // Each output computed apart from the others (ops.h: a null one is skipped).
  // dx[N,I] (+)= dy[N,O] @ W[O,I]
  if (dx != nullptr) gemm<T>(false, false, N, I, O, T(1), dy, O, W, I, accumulate_dx ? T(1) : T(0), dx, I);
  if (dW != nullptr) gemm<T>(true, false, O, I, N, T(1), dy, O, x, I, T(1), dW, I);  // dW[O,I] += dy^T @ x
  if (db != nullptr) add_column_sums(db, dy, N, O);                                  // db[O] += sum_n dy
}

template void add_column_sums<float>(float*, const float*, int64_t, int64_t);
template void fill_rows<float>(float*, const float*, int64_t, int64_t);
template void linear_forward<float>(float*, const float*, const float*, const float*, int64_t, int64_t, int64_t);
template void linear_forward<double>(double*, const double*, const double*, const double*, int64_t, int64_t,
                                     int64_t);
template void linear_backward<float>(float*, float*, float*, const float*, const float*, const float*, int64_t,
                                     int64_t, int64_t, bool);
template void linear_backward<double>(double*, double*, double*, const double*, const double*, const double*,
                                      int64_t, int64_t, int64_t, bool);

}  // namespace tera::cpu
