// The cuda backend (backend_cuda.h): device memory from cudaMalloc, every
// launch and copy on one compute stream, GEMMs through cuBLASLt (fp32, or
// bf16 inputs with fp32 accumulation; the bias added by the GEMM's epilogue,
// and the GPT MLP's GELU and its gradient by the GELU_AUX_BIAS and DGELU
// epilogues where cuBLASLt has them for the shape), and the dialect kernels
// of kernels/gpu/ops_launch.h.
//
// Row-major products on a column-major library: a row-major [R, C] matrix is
// the column-major [C, R] matrix, its transpose, so C = op(A) op(B) row-major
// is C^T = op(B)^T op(A)^T column-major: the library is called with the
// operands swapped and m, n exchanged (gemm_rm below).
#include "kernels/gpu/cuda/backend_cuda.h"

#include <cublasLt.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <mutex>
#include <string>
#include <unordered_map>

#include "kernels/caching_allocator.h"
#include "kernels/gpu/ops_launch.h"

namespace tera {

namespace {

[[noreturn]] void cuda_fail(const char* what, const char* detail) {
  std::fprintf(stderr, "tera: cuda backend: %s: %s\n", what, detail);
  std::fflush(stderr);
  std::abort();
}

void check(cudaError_t e, const char* what) {
  if (e != cudaSuccess) cuda_fail(what, cudaGetErrorString(e));
}

void check(cublasStatus_t s, const char* what) {
  if (s != CUBLAS_STATUS_SUCCESS) cuda_fail(what, ("cuBLASLt status " + std::to_string(static_cast<int>(s))).c_str());
}

struct Context {
  cudaStream_t stream = nullptr;
  cublasLtHandle_t lt = nullptr;
  void* workspace = nullptr;
  size_t workspace_bytes = size_t{32} << 20;  // cuBLASLt's workspace: 32 MiB covers Hopper's kernels
  void* scratch = nullptr;
  int64_t scratch_bytes = 0;
  Context() {
    check(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking), "cudaStreamCreate");
    check(cublasLtCreate(&lt), "cublasLtCreate");
    check(cudaMalloc(&workspace, workspace_bytes), "cudaMalloc (cuBLASLt workspace)");
  }
};

Context& ctx() {
  static Context c;
  return c;
}

// What cuBLASLt's epilogue does after the product (col-major D[m, n]): the
// bias (a vector of m, added to every column), GELU with its input kept in
// aux (GELU_AUX_BIAS), or the GELU gradient at aux (DGELU). aux is [m, n]
// with leading dimension aux_ld (a multiple of 8).
struct LtEpilogue {
  cublasLtEpilogue_t kind = CUBLASLT_EPILOGUE_DEFAULT;
  const void* bias = nullptr;
  cudaDataType_t bias_type = CUDA_R_32F;
  const void* aux = nullptr;
  int64_t aux_ld = 0;
  cudaDataType_t aux_type = CUDA_R_16BF;
};

// What the heuristic's choice depends on: the product's shape, types,
// epilogue and the alignment of every operand (up to 256 bytes).
struct LtKey {
  int64_t m, n, k, lda, ldb, ldc, aux_ld;
  int32_t ta, tb, ab, cd, epilogue, bias_type, aux_type;
  int32_t align[5];  // A, B, C, bias, aux
  bool operator==(const LtKey&) const = default;
};
struct LtKeyHash {
  size_t operator()(const LtKey& k) const {
    size_t h = 1469598103934665603ull;
    auto mix = [&h](int64_t v) { h = (h ^ static_cast<size_t>(v)) * 1099511628211ull; };
    for (int64_t v : {k.m, k.n, k.k, k.lda, k.ldb, k.ldc, k.aux_ld}) mix(v);
    for (int32_t v : {k.ta, k.tb, k.ab, k.cd, k.epilogue, k.bias_type, k.aux_type}) mix(v);
    for (int32_t v : k.align) mix(v);
    return h;
  }
};
struct LtChoice {
  bool found = false;  // false: cuBLASLt has no algorithm for it (or refused the query)
  cublasStatus_t status = CUBLAS_STATUS_SUCCESS;
  cublasLtMatmulAlgo_t algo{};
};
int32_t alignment(const void* p) {
  const auto u = reinterpret_cast<uintptr_t>(p);
  return u == 0 ? 256 : static_cast<int32_t>(std::min<uintptr_t>(256, u & (~u + 1)));
}
// cuBLASLt's heuristic is a host-side search (tens of microseconds): asked
// once per product description, its answer kept for the process.
std::unordered_map<LtKey, LtChoice, LtKeyHash>& lt_choices() {
  static auto* m = new std::unordered_map<LtKey, LtChoice, LtKeyHash>();
  return *m;
}
std::mutex& lt_choices_mutex() {
  static std::mutex mu;
  return mu;
}

template <typename T>
void set_attr(cublasLtMatmulDesc_t desc, cublasLtMatmulDescAttributes_t a, const T& v, const char* what) {
  check(cublasLtMatmulDescSetAttribute(desc, a, &v, sizeof v), what);
}

// D (col-major m x n, ldc, type cd) = alpha op(A) op(B) + beta D, then the
// epilogue; A and B of type ab (fp32 or bf16), fp32 compute. With
// `refusable`, returns false without writing anything when cuBLASLt has no
// algorithm for this product and epilogue, or refuses the call as not
// supported or invalid (the caller runs it another way); otherwise that
// aborts.
bool lt_gemm(bool ta, bool tb, int64_t m, int64_t n, int64_t k, float alpha, const void* A, int64_t lda,
             const void* B, int64_t ldb, float beta, void* C, int64_t ldc, cudaDataType_t ab, cudaDataType_t cd,
             const LtEpilogue& epi = {}, bool refusable = false) {
  if (m <= 0 || n <= 0) return true;
  Context& c = ctx();
  cublasLtMatmulDesc_t desc;
  check(cublasLtMatmulDescCreate(&desc, CUBLAS_COMPUTE_32F, CUDA_R_32F), "cublasLtMatmulDescCreate");
  const cublasOperation_t opa = ta ? CUBLAS_OP_T : CUBLAS_OP_N, opb = tb ? CUBLAS_OP_T : CUBLAS_OP_N;
  set_attr(desc, CUBLASLT_MATMUL_DESC_TRANSA, opa, "TRANSA");
  set_attr(desc, CUBLASLT_MATMUL_DESC_TRANSB, opb, "TRANSB");
  if (epi.kind != CUBLASLT_EPILOGUE_DEFAULT) {
    set_attr(desc, CUBLASLT_MATMUL_DESC_EPILOGUE, epi.kind, "EPILOGUE");
    if (epi.bias != nullptr) {
      set_attr(desc, CUBLASLT_MATMUL_DESC_BIAS_POINTER, epi.bias, "BIAS_POINTER");
      set_attr(desc, CUBLASLT_MATMUL_DESC_BIAS_DATA_TYPE, static_cast<int32_t>(epi.bias_type), "BIAS_DATA_TYPE");
    }
    if (epi.aux != nullptr) {
      set_attr(desc, CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_POINTER, epi.aux, "EPILOGUE_AUX_POINTER");
      set_attr(desc, CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_LD, epi.aux_ld, "EPILOGUE_AUX_LD");
      set_attr(desc, CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_DATA_TYPE, static_cast<int32_t>(epi.aux_type),
               "EPILOGUE_AUX_DATA_TYPE");
    }
  }
  cublasLtMatrixLayout_t la, lb, lc;
  check(cublasLtMatrixLayoutCreate(&la, ab, ta ? k : m, ta ? m : k, lda), "layout A");
  check(cublasLtMatrixLayoutCreate(&lb, ab, tb ? n : k, tb ? k : n, ldb), "layout B");
  check(cublasLtMatrixLayoutCreate(&lc, cd, m, n, ldc), "layout C");
  const LtKey key{m, n, k, lda, ldb, ldc, epi.aux_ld, ta, tb, static_cast<int32_t>(ab), static_cast<int32_t>(cd),
                  static_cast<int32_t>(epi.kind), static_cast<int32_t>(epi.bias_type),
                  static_cast<int32_t>(epi.aux_type),
                  {alignment(A), alignment(B), alignment(C), alignment(epi.bias), alignment(epi.aux)}};
  LtChoice choice;
  {
    std::lock_guard<std::mutex> lock(lt_choices_mutex());
    auto it = lt_choices().find(key);
    if (it == lt_choices().end()) {
      cublasLtMatmulPreference_t pref;
      check(cublasLtMatmulPreferenceCreate(&pref), "preference");
      check(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &c.workspace_bytes,
                                                 sizeof c.workspace_bytes),
            "workspace preference");
      cublasLtMatmulHeuristicResult_t heur{};
      int found = 0;
      choice.status = cublasLtMatmulAlgoGetHeuristic(c.lt, desc, la, lb, lc, lc, pref, 1, &heur, &found);
      cublasLtMatmulPreferenceDestroy(pref);
      choice.found = choice.status == CUBLAS_STATUS_SUCCESS && found > 0;
      choice.algo = heur.algo;
      it = lt_choices().emplace(key, choice).first;
    }
    choice = it->second;
  }
  const cublasStatus_t hs = choice.status;
  bool ok = choice.found;
  if (ok) {
    const cublasStatus_t ms = cublasLtMatmul(c.lt, desc, &alpha, A, la, B, lb, &beta, C, lc, C, lc, &choice.algo,
                                             c.workspace, c.workspace_bytes, c.stream);
    // Refused before it launched: an argument combination it does not take.
    ok = ms == CUBLAS_STATUS_SUCCESS;
    if (!ok && !(refusable && (ms == CUBLAS_STATUS_NOT_SUPPORTED || ms == CUBLAS_STATUS_INVALID_VALUE))) {
      check(ms, "cublasLtMatmul");
    }
    if (!ok) {  // remembered: the same description goes the other way at once
      std::lock_guard<std::mutex> lock(lt_choices_mutex());
      lt_choices()[key].found = false;
    }
  } else if (!refusable) {
    if (hs != CUBLAS_STATUS_SUCCESS) check(hs, "cublasLtMatmulAlgoGetHeuristic");
    cuda_fail("cublasLtMatmulAlgoGetHeuristic", "no algorithm for this product");
  }
  cublasLtMatrixLayoutDestroy(lc);
  cublasLtMatrixLayoutDestroy(lb);
  cublasLtMatrixLayoutDestroy(la);
  cublasLtMatmulDescDestroy(desc);
  return ok;
}

// Row-major C[M,N] = alpha op(A) op(B) + beta C (+ bias[N] on every row), C fp32.
void gemm_rm(bool ta, bool tb, int64_t M, int64_t N, int64_t K, float alpha, const void* A, int64_t lda, const void* B,
             int64_t ldb, float beta, float* C, int64_t ldc, cudaDataType_t ab, const float* bias) {
  LtEpilogue epi;
  if (bias != nullptr) epi = LtEpilogue{CUBLASLT_EPILOGUE_BIAS, bias, CUDA_R_32F};
  lt_gemm(tb, ta, N, M, K, alpha, B, ldb, A, lda, beta, C, ldc, ab, CUDA_R_32F, epi);
}

// The raw allocation and free behind the caching allocator.
void* cuda_raw_alloc(int64_t bytes) {
  void* p = nullptr;
  if (cudaMalloc(&p, static_cast<size_t>(bytes)) != cudaSuccess) {
    (void)cudaGetLastError();  // clear the out-of-memory error: the caller reports it
    return nullptr;
  }
  return p;
}

void cuda_raw_free(void* p) {
  check(cudaStreamSynchronize(ctx().stream), "cudaStreamSynchronize (release)");
  check(cudaFree(p), "cudaFree");
}

// Never destroyed: the CUDA context may be gone when statics are.
CachingAllocator& cuda_cache() {
  static CachingAllocator* cache = new CachingAllocator(cuda_raw_alloc, cuda_raw_free);
  return *cache;
}

void* cuda_alloc(int64_t bytes) { return cuda_cache().allocate(bytes); }

void cuda_release(void* p) {
  if (p == nullptr) return;
  if (!cuda_cache().release(p)) cuda_fail("release", "a pointer this backend did not allocate");
}

void cuda_copy(void* dst, const void* src, int64_t bytes, CopyKind kind) {
  if (bytes <= 0 || dst == src) return;
  const cudaMemcpyKind k = kind == CopyKind::host_to_device   ? cudaMemcpyHostToDevice
                           : kind == CopyKind::device_to_host ? cudaMemcpyDeviceToHost
                                                              : cudaMemcpyDeviceToDevice;
  check(cudaMemcpyAsync(dst, src, static_cast<size_t>(bytes), k, ctx().stream), "cudaMemcpyAsync");
  // A host buffer may be read or freed as soon as the call returns.
  if (kind != CopyKind::device_to_device) check(cudaStreamSynchronize(ctx().stream), "cudaStreamSynchronize (copy)");
}

void cuda_fill(void* dst, DType t, double value, int64_t n) {
  if (!gpu::launch::fill(dst, t, value, n)) cuda_fail("fill", "f16 with a non-zero value");
}

void cuda_cast(void* dst, DType dst_t, const void* src, DType src_t, int64_t n) {
  if (!gpu::launch::cast(dst, dst_t, src, src_t, n)) cuda_fail("cast", "a pair of dtypes it does not convert");
}

void cuda_synchronize() { check(cudaStreamSynchronize(ctx().stream), "cudaStreamSynchronize"); }

void cuda_gemm(bool ta, bool tb, int64_t M, int64_t N, int64_t K, float alpha, const float* A, int64_t lda,
               const float* B, int64_t ldb, float beta, float* C, int64_t ldc) {
  gemm_rm(ta, tb, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc, CUDA_R_32F, nullptr);
}

void cuda_linear_forward(float* y, const float* x, const float* W, const float* b, int64_t N, int64_t I, int64_t O) {
  gemm_rm(false, true, N, O, I, 1.0f, x, I, W, I, 0.0f, y, O, CUDA_R_32F, b);
}

void cuda_linear_backward(float* dx, float* dW, float* db, const float* dy, const float* x, const float* W, int64_t N,
                          int64_t I, int64_t O, bool accumulate_dx) {
  if (dx != nullptr) gemm_rm(false, false, N, I, O, 1.0f, dy, O, W, I, accumulate_dx ? 1.0f : 0.0f, dx, I, CUDA_R_32F, nullptr);
  gemm_rm(true, false, O, I, N, 1.0f, dy, O, x, I, 1.0f, dW, I, CUDA_R_32F, nullptr);
  if (db != nullptr) gpu::launch::column_sums(db, dy, N, O);
}

void cuda_linear_forward_bf16(float* y, const uint16_t* x, const uint16_t* W, const float* b, int64_t N, int64_t I,
                              int64_t O) {
  gemm_rm(false, true, N, O, I, 1.0f, x, I, W, I, 0.0f, y, O, CUDA_R_16BF, b);
}

// Says once per epilogue, on stderr, why the GELU runs as its own pass
// instead (the device check's log shows which path ran).
void note_unfused(const char* epilogue, const char* why, std::atomic<bool>& said, int64_t m, int64_t n, int64_t k) {
  if (said.exchange(true)) return;
  std::fprintf(stderr,
               "tera: cuda backend: no cuBLASLt %s epilogue for the bf16 product m=%lld n=%lld k=%lld (%s); the "
               "GELU runs as its own pass (said once)\n",
               epilogue, static_cast<long long>(m), static_cast<long long>(n), static_cast<long long>(k), why);
}

constexpr const char* kNotMultipleOf8 = "the GELU matrix's width is not a multiple of 8";
constexpr const char* kRefused = "cuBLASLt refused it here";

// The bf16 linear backward; with gelu_pre (the MLP's down-projection, whose
// input is gelu(pre)) dx is the gradient of pre instead: the dx product runs
// cuBLASLt's DGELU epilogue reading pre as aux (dx = (dy W) * gelu'(pre)),
// or a GELU-gradient pass after it where cuBLASLt does not take that.
void linear_backward_bf16_any(float* dx, float* dW, float* db, const float* dy, const uint16_t* xb, const uint16_t* W,
                              int64_t N, int64_t I, int64_t O, bool accumulate_dx, uint16_t* cast,
                              const uint16_t* gelu_pre) {
  static std::atomic<bool> said{false};
  uint16_t* dyb = cast;  // [N, O]
  cuda_cast(dyb, DType::bf16, dy, DType::f32, N * O);
  if (dx != nullptr) {
    // Row-major dx[N,I] = dyb[N,O] W[O,I] is col-major dx^T[I,N] = W^T dyb^T.
    const LtEpilogue dgelu{CUBLASLT_EPILOGUE_DGELU, nullptr, CUDA_R_32F, gelu_pre, I, CUDA_R_16BF};
    const bool fused = gelu_pre != nullptr && I % 8 == 0 && N > 0 &&
                       lt_gemm(false, false, I, N, O, 1.0f, W, I, dyb, O, 0.0f, dx, I, CUDA_R_16BF, CUDA_R_32F, dgelu,
                               true);
    if (!fused) {
      gemm_rm(false, false, N, I, O, 1.0f, dyb, O, W, I, accumulate_dx ? 1.0f : 0.0f, dx, I, CUDA_R_16BF, nullptr);
      if (gelu_pre != nullptr && N > 0) {
        note_unfused("DGELU", I % 8 == 0 ? kRefused : kNotMultipleOf8, said, I, N, O);
        gpu::launch::gelu_backward_bf16(dx, gelu_pre, dx, N * I);
      }
    }
  }
  gemm_rm(true, false, O, I, N, 1.0f, dyb, O, xb, I, 1.0f, dW, I, CUDA_R_16BF, nullptr);
  if (db != nullptr) gpu::launch::column_sums(db, dy, N, O);
}

void cuda_linear_backward_bf16(float* dx, float* dW, float* db, const float* dy, const uint16_t* xb, const uint16_t* W,
                               int64_t N, int64_t I, int64_t O, bool accumulate_dx, uint16_t* cast) {
  linear_backward_bf16_any(dx, dW, db, dy, xb, W, N, I, O, accumulate_dx, cast, nullptr);
}

// The MLP's first linear layer with GELU in cuBLASLt's epilogue
// (GELU_AUX_BIAS: act = gelu(y) into D, y into aux, both bf16). cuBLASLt's
// bias has D's type: b is rounded to bf16 first (O values, in scratch).
void cuda_linear_gelu_forward_bf16(uint16_t* act, uint16_t* pre, const uint16_t* x, const uint16_t* W, const float* b,
                                   int64_t N, int64_t I, int64_t O, float* work) {
  static std::atomic<bool> said{false};
  if (N <= 0 || O <= 0) return;
  if (O % 8 == 0) {  // aux's leading dimension must be a multiple of 8
    LtEpilogue epi{CUBLASLT_EPILOGUE_GELU_AUX, nullptr, CUDA_R_16BF, pre, O, CUDA_R_16BF};
    if (b != nullptr) {
      auto* b16 = static_cast<uint16_t*>(gpu::scratch(O * static_cast<int64_t>(sizeof(uint16_t))));
      cuda_cast(b16, DType::bf16, b, DType::f32, O);
      epi.kind = CUBLASLT_EPILOGUE_GELU_AUX_BIAS;
      epi.bias = b16;
    }
    // Row-major act[N,O] = x[N,I] W[O,I]^T is col-major act^T[O,N] = W x^T.
    if (lt_gemm(true, false, O, N, I, 1.0f, W, I, x, I, 0.0f, act, O, CUDA_R_16BF, CUDA_R_16BF, epi, true)) return;
  }
  note_unfused(b != nullptr ? "GELU_AUX_BIAS" : "GELU_AUX", O % 8 == 0 ? kRefused : kNotMultipleOf8, said, O, N, I);
  gpu::launch::linear_gelu_forward_bf16_passes(cuda_linear_forward_bf16, act, pre, x, W, b, N, I, O, work);
}

// The MLP's output projection with the GELU gradient in cuBLASLt's epilogue
// of the dx product (linear_backward_bf16_any).
void cuda_linear_backward_gelu_bf16(float* dpre, float* dW, float* db, const float* dy, const uint16_t* xb,
                                    const uint16_t* W, const uint16_t* pre, int64_t N, int64_t I, int64_t O,
                                    uint16_t* cast) {
  linear_backward_bf16_any(dpre, dW, db, dy, xb, W, N, I, O, false, cast, pre);
}

const char* cuda_gemm_bf16_path() { return "cuBLASLt: bf16 inputs, fp32 accumulation (tensor cores)"; }

bool cuda_supports(KernelOp op, DType dtype) {
  if (dtype == DType::f32) return true;
  return dtype == DType::bf16 && (kernel_op_need(op) == OpNeed::bf16 || op == KernelOp::fill ||
                                  op == KernelOp::tile_gemm_bf16 || op == KernelOp::linear_gelu_forward_bf16 ||
                                  op == KernelOp::linear_backward_gelu_bf16);
}

}  // namespace
}  // namespace tera

TERA_GPU_BEGIN

Stream current_stream() { return ctx().stream; }

void* scratch(int64_t bytes) {
  Context& c = ctx();
  if (bytes > c.scratch_bytes) {
    if (c.scratch != nullptr) cuda_raw_free(c.scratch);
    check(cudaMalloc(&c.scratch, static_cast<size_t>(bytes)), "cudaMalloc (reduction scratch)");
    c.scratch_bytes = bytes;
  }
  return c.scratch;
}

TERA_GPU_END

namespace tera {

std::string cuda_device_status() {
  int n = 0;
  const cudaError_t e = cudaGetDeviceCount(&n);
  if (e != cudaSuccess) return std::string("no usable GPU: ") + cudaGetErrorString(e);
  if (n == 0) return "no usable GPU: the driver reports no CUDA device";
  return "";
}

// The GPU's free memory (cudaMemGetInfo); 0 (unknown) if the driver cannot say.
static void* cuda_compute_stream() { return static_cast<void*>(ctx().stream); }

static int64_t cuda_memory_available() {
  size_t free_bytes = 0, total_bytes = 0;
  if (cudaMemGetInfo(&free_bytes, &total_bytes) != cudaSuccess) {
    (void)cudaGetLastError();
    return 0;
  }
  return static_cast<int64_t>(free_bytes) + cuda_cache().stats().cached;  // cached blocks are given back on demand
}

// The device of this rank (device_for_rank), made current for the process.
static std::string cuda_bind_device(int local_rank, int local_size) {
  int n = 0;
  if (const cudaError_t e = cudaGetDeviceCount(&n); e != cudaSuccess) {
    (void)cudaGetLastError();
    return std::string("no usable GPU: ") + cudaGetErrorString(e);
  }
  const int device = device_for_rank(local_rank, local_size, n);
  if (device < 0) return too_few_devices(local_size, n);
  if (const cudaError_t e = cudaSetDevice(device); e != cudaSuccess) {
    (void)cudaGetLastError();
    return "cudaSetDevice(" + std::to_string(device) + "): " + cudaGetErrorString(e);
  }
  return "";
}

// The current device's UUID as nvidia-smi prints it (GPU-8-4-4-4-12 hex).
static std::string cuda_device_identity() {
  int device = 0;
  cudaDeviceProp p{};
  if (cudaGetDevice(&device) != cudaSuccess || cudaGetDeviceProperties(&p, device) != cudaSuccess) {
    (void)cudaGetLastError();
    return "";
  }
  static const char* hex = "0123456789abcdef";
  std::string id = "GPU-";
  for (int i = 0; i < 16; ++i) {
    const auto b = static_cast<unsigned char>(p.uuid.bytes[i]);
    id += hex[b >> 4];
    id += hex[b & 15];
    if (i == 3 || i == 5 || i == 7 || i == 9) id += '-';
  }
  return id;
}

std::string cuda_device_name() {
  int device = 0;
  if (cudaGetDevice(&device) != cudaSuccess) device = 0;
  cudaDeviceProp p{};
  if (cudaGetDeviceProperties(&p, device) != cudaSuccess) return "?";
  return std::string(p.name) + " (sm_" + std::to_string(p.major) + std::to_string(p.minor) + ", " +
         std::to_string(p.multiProcessorCount) + " SMs)";
}

const Backend& cuda_backend() {
  static const Backend backend = [] {
    Backend b{
        .name = "cuda",
        .gemm_library = "cuBLASLt",
        .gemm_bf16_path = cuda_gemm_bf16_path,
        .unavailable = cuda_device_status,
        .memory_available = cuda_memory_available,
        .bind_device = cuda_bind_device,
        .device_identity = cuda_device_identity,
        .addressing = {DeviceAddressing::Kind::device, nullptr, cuda_compute_stream},
        .alloc = cuda_alloc,
        .release = cuda_release,
        .fill = cuda_fill,
        .copy = cuda_copy,
        .synchronize = cuda_synchronize,
        .gemm = cuda_gemm,
        .linear_forward = cuda_linear_forward,
        .linear_backward = cuda_linear_backward,
        .linear_forward_bf16 = cuda_linear_forward_bf16,
        .linear_backward_bf16 = cuda_linear_backward_bf16,
        .linear_gelu_forward_bf16 = cuda_linear_gelu_forward_bf16,
        .linear_backward_gelu_bf16 = cuda_linear_backward_gelu_bf16,
        .cast = cuda_cast,
        .supports = cuda_supports,
    };
    gpu::launch::set_dialect_ops(b);
    return b;
  }();
  return backend;
}

}  // namespace tera
