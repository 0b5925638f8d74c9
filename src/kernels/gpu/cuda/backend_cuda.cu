// The cuda backend (backend_cuda.h). A CudaContext per instance is the
// runtime backends' shared device state (kernels/gpu/runtime/
// runtime_context.h: streams, events, memory, scratch, pinned staging, the
// device binding; the same source the hip backend compiles) plus cuBLASLt:
// its handle, workspace and per-product plans, started with the streams on
// first use, after bind_device.
//
// GEMMs through cuBLASLt: fp32, or bf16 inputs with fp32 accumulation; the
// bias added by the GEMM's epilogue, and the GPT MLP's GELU by the
// GELU_AUX_BIAS epilogue where cuBLASLt has an algorithm for the shape. Only
// documented combinations are asked for: the auxiliary matrix has D's type
// (bf16), so the GELU gradient, whose output is fp32 beside a bf16 aux,
// runs as its own pass after the dx product (DGELU would need an fp32 aux).
// Each distinct product's path is reported once (gemm_report).
//
// Row-major products on a column-major library: a row-major [R, C] matrix is
// the column-major [C, R] matrix, its transpose, so C = op(A) op(B) row-major
// is C^T = op(B)^T op(A)^T column-major: the library is called with the
// operands swapped and m, n exchanged (gemm_rm below).
#include "kernels/gpu/cuda/backend_cuda.h"

#include <cublasLt.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <memory>
#include <string>
#include <unordered_map>

#include "kernels/gpu/runtime/runtime_context.h"

namespace tera {

namespace {

using gpu::RuntimeContext;

[[noreturn]] void cuda_fail(const std::string& what, const std::string& detail) { gpu::runtime_fail(what, detail); }

void check(cublasStatus_t s, const char* what) {
  if (s != CUBLAS_STATUS_SUCCESS) cuda_fail(what, "cuBLASLt status " + std::to_string(static_cast<int>(s)));
}

// What cuBLASLt's epilogue does after the product (col-major D[m, n]): the
// bias (a vector of m, D's type, added to every column), or GELU with its
// input kept in aux (GELU_AUX_BIAS; aux [m, n], D's type, leading
// dimension aux_ld, a multiple of 8).
struct LtEpilogue {
  cublasLtEpilogue_t kind = CUBLASLT_EPILOGUE_DEFAULT;
  const void* bias = nullptr;
  void* aux = nullptr;
  int64_t aux_ld = 0;
};

// What the heuristic's choice depends on: the product's shape, types,
// epilogue and the alignment of every operand (up to 256 bytes).
struct LtKey {
  int64_t m, n, k, lda, ldb, ldc, aux_ld;
  int32_t ta, tb, ab, cd, epilogue;
  int32_t align[5];  // A, B, C, bias, aux
  bool operator==(const LtKey&) const = default;
};
struct LtKeyHash {
  size_t operator()(const LtKey& k) const {
    size_t h = 1469598103934665603ull;
    auto mix = [&h](int64_t v) { h = (h ^ static_cast<size_t>(v)) * 1099511628211ull; };
    for (int64_t v : {k.m, k.n, k.k, k.lda, k.ldb, k.ldc, k.aux_ld}) mix(v);
    for (int32_t v : {k.ta, k.tb, k.ab, k.cd, k.epilogue}) mix(v);
    for (int32_t v : k.align) mix(v);
    return h;
  }
};
// One product description's descriptors and chosen algorithm, made once;
// a call sets only its pointers (bias, aux) on the descriptor.
struct LtPlan {
  bool found = false;  // false: cuBLASLt has no algorithm for it (or refused it)
  cublasStatus_t status = CUBLAS_STATUS_SUCCESS;
  cublasLtMatmulDesc_t desc = nullptr;
  cublasLtMatrixLayout_t la = nullptr, lb = nullptr, lc = nullptr;
  cublasLtMatmulAlgo_t algo{};
};
int32_t alignment(const void* p) {
  const auto u = reinterpret_cast<uintptr_t>(p);
  return u == 0 ? 256 : static_cast<int32_t>(std::min<uintptr_t>(256, u & (~u + 1)));
}
const char* epilogue_name(cublasLtEpilogue_t e) {
  switch (e) {
    case CUBLASLT_EPILOGUE_BIAS: return "bias";
    case CUBLASLT_EPILOGUE_GELU_AUX: return "GELU_AUX";
    case CUBLASLT_EPILOGUE_GELU_AUX_BIAS: return "GELU_AUX_BIAS";
    default: return "none";
  }
}

template <typename T>
void set_attr(cublasLtMatmulDesc_t desc, cublasLtMatmulDescAttributes_t a, const T& v, const char* what) {
  check(cublasLtMatmulDescSetAttribute(desc, a, &v, sizeof v), what);
}

class CudaContext final : public RuntimeContext {
 public:
  ~CudaContext() override {
    if (lt_ == nullptr) return;
    (void)gpu::rt::device_sync();
    for (auto& [key, p] : plans_) {
      if (p.lc != nullptr) cublasLtMatrixLayoutDestroy(p.lc);
      if (p.lb != nullptr) cublasLtMatrixLayoutDestroy(p.lb);
      if (p.la != nullptr) cublasLtMatrixLayoutDestroy(p.la);
      if (p.desc != nullptr) cublasLtMatmulDescDestroy(p.desc);
    }
    cudaFree(workspace_);
    cublasLtDestroy(lt_);
  }

  // D (col-major m x n, ldc, type cd) = alpha op(A) op(B) + beta D, then the
  // epilogue; A and B of type ab (fp32 or bf16), fp32 compute. With
  // `refusable`, returns false without writing anything when cuBLASLt has
  // no algorithm for this product and epilogue, or refuses the call as not
  // supported or invalid (the caller runs it another way); otherwise that
  // ends the process with cuBLASLt's status.
  bool lt_gemm(bool ta, bool tb, int64_t m, int64_t n, int64_t k, float alpha, const void* A, int64_t lda,
               const void* B, int64_t ldb, float beta, void* C, int64_t ldc, cudaDataType_t ab, cudaDataType_t cd,
               const LtEpilogue& epi = {}, bool refusable = false) {
    if (m <= 0 || n <= 0) return true;
    start();
    const LtKey key{m, n, k, lda, ldb, ldc, epi.aux_ld, ta, tb, static_cast<int32_t>(ab), static_cast<int32_t>(cd),
                    static_cast<int32_t>(epi.kind),
                    {alignment(A), alignment(B), alignment(C), alignment(epi.bias), alignment(epi.aux)}};
    LtPlan& plan = plan_for(key, epi);
    bool ok = plan.found;
    if (ok) {
      if (epi.bias != nullptr) set_attr(plan.desc, CUBLASLT_MATMUL_DESC_BIAS_POINTER, epi.bias, "BIAS_POINTER");
      if (epi.aux != nullptr) set_attr(plan.desc, CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_POINTER, epi.aux, "AUX_POINTER");
      const cublasStatus_t ms = cublasLtMatmul(lt_, plan.desc, &alpha, A, plan.la, B, plan.lb, &beta, C, plan.lc, C,
                                               plan.lc, &plan.algo, workspace_, kWorkspaceBytes, stream);
      // Refused before it launched: an argument combination it does not take.
      ok = ms == CUBLAS_STATUS_SUCCESS;
      if (!ok && !(refusable && (ms == CUBLAS_STATUS_NOT_SUPPORTED || ms == CUBLAS_STATUS_INVALID_VALUE))) {
        check(ms, "cublasLtMatmul");
      }
      if (!ok) {  // remembered: the same description goes the other way at once
        plan.found = false;
        plan.status = ms;
        note_path(key, "refused by cublasLtMatmul (status " + std::to_string(static_cast<int>(ms)) + ")");
      }
    } else if (!refusable) {
      if (plan.status != CUBLAS_STATUS_SUCCESS) check(plan.status, "cublasLtMatmulAlgoGetHeuristic");
      cuda_fail("cublasLtMatmulAlgoGetHeuristic", "no algorithm for this product");
    }
    if (ok && sync_each_op()) gpu::runtime_check(cudaStreamSynchronize(stream), "cublasLtMatmul (TERA_DEVICE_SYNC=1)");
    return ok;
  }

  // Says once per product which way it ran.
  void note_path(const LtKey& k, const std::string& how) {
    const std::string what = std::string(k.ab == CUDA_R_16BF ? "bf16" : "fp32") + " GEMM m=" + std::to_string(k.m) +
                             " n=" + std::to_string(k.n) + " k=" + std::to_string(k.k) + " epilogue " +
                             epilogue_name(static_cast<cublasLtEpilogue_t>(k.epilogue));
    paths_[what] = how;
  }
  void note_fallback(const std::string& what, const std::string& how) { paths_[what] = how; }
  std::string report() const {
    std::string out;
    for (const auto& [what, how] : paths_) out += what + ": " + how + "\n";
    return out;
  }

 protected:
  void start_libraries() override {
    check(cublasLtCreate(&lt_), "cublasLtCreate");
    gpu::runtime_check(cudaMalloc(&workspace_, kWorkspaceBytes), "cudaMalloc (cuBLASLt workspace)");
  }

 private:
  static constexpr size_t kWorkspaceBytes = size_t{32} << 20;  // cuBLASLt's: 32 MiB covers Hopper's kernels

  // The plan of a product description: descriptors and the heuristic's
  // choice, made on first use with the operands' alignments as minimum
  // alignment preferences, kept for the process.
  LtPlan& plan_for(const LtKey& key, const LtEpilogue& epi) {
    auto it = plans_.find(key);
    if (it != plans_.end()) return it->second;
    LtPlan p;
    check(cublasLtMatmulDescCreate(&p.desc, CUBLAS_COMPUTE_32F, CUDA_R_32F), "cublasLtMatmulDescCreate");
    const cublasOperation_t opa = key.ta ? CUBLAS_OP_T : CUBLAS_OP_N, opb = key.tb ? CUBLAS_OP_T : CUBLAS_OP_N;
    set_attr(p.desc, CUBLASLT_MATMUL_DESC_TRANSA, opa, "TRANSA");
    set_attr(p.desc, CUBLASLT_MATMUL_DESC_TRANSB, opb, "TRANSB");
    const auto epilogue = static_cast<cublasLtEpilogue_t>(key.epilogue);
    if (epilogue != CUBLASLT_EPILOGUE_DEFAULT) set_attr(p.desc, CUBLASLT_MATMUL_DESC_EPILOGUE, epilogue, "EPILOGUE");
    if (key.aux_ld > 0) set_attr(p.desc, CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_LD, key.aux_ld, "EPILOGUE_AUX_LD");
    // The first call's pointers (the key holds their alignment); each call sets its own.
    if (epi.bias != nullptr) set_attr(p.desc, CUBLASLT_MATMUL_DESC_BIAS_POINTER, epi.bias, "BIAS_POINTER");
    if (epi.aux != nullptr) set_attr(p.desc, CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_POINTER, epi.aux, "AUX_POINTER");
    const auto ab = static_cast<cudaDataType_t>(key.ab), cd = static_cast<cudaDataType_t>(key.cd);
    check(cublasLtMatrixLayoutCreate(&p.la, ab, key.ta ? key.k : key.m, key.ta ? key.m : key.k, key.lda), "layout A");
    check(cublasLtMatrixLayoutCreate(&p.lb, ab, key.tb ? key.n : key.k, key.tb ? key.k : key.n, key.ldb), "layout B");
    check(cublasLtMatrixLayoutCreate(&p.lc, cd, key.m, key.n, key.ldc), "layout C");
    cublasLtMatmulPreference_t pref;
    check(cublasLtMatmulPreferenceCreate(&pref), "preference");
    const size_t ws = kWorkspaceBytes;
    check(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &ws, sizeof ws),
          "workspace preference");
    const uint32_t align_a = static_cast<uint32_t>(key.align[0]), align_b = static_cast<uint32_t>(key.align[1]),
                   align_c = static_cast<uint32_t>(key.align[2]);
    check(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, &align_a, sizeof align_a),
          "alignment preference A");
    check(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES, &align_b, sizeof align_b),
          "alignment preference B");
    check(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, &align_c, sizeof align_c),
          "alignment preference C");
    check(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES, &align_c, sizeof align_c),
          "alignment preference D");
    cublasLtMatmulHeuristicResult_t heur{};
    int found = 0;
    p.status = cublasLtMatmulAlgoGetHeuristic(lt_, p.desc, p.la, p.lb, p.lc, p.lc, pref, 1, &heur, &found);
    cublasLtMatmulPreferenceDestroy(pref);
    p.found = p.status == CUBLAS_STATUS_SUCCESS && found > 0;
    p.algo = heur.algo;
    note_path(key, p.found ? "cuBLASLt" : "no cuBLASLt algorithm (status " + std::to_string(static_cast<int>(p.status)) + ")");
    return plans_.emplace(key, p).first->second;
  }
  cublasLtHandle_t lt_ = nullptr;
  void* workspace_ = nullptr;
  std::unordered_map<LtKey, LtPlan, LtKeyHash> plans_;
  std::map<std::string, std::string> paths_;  // product -> the path it took
};

CudaContext& cuda(BackendContext* c) { return static_cast<CudaContext&>(gpu::runtime(c)); }

// Row-major C[M,N] = alpha op(A) op(B) + beta C (+ bias[N] on every row), C fp32.
void gemm_rm(CudaContext& c, bool ta, bool tb, int64_t M, int64_t N, int64_t K, float alpha, const void* A,
             int64_t lda, const void* B, int64_t ldb, float beta, float* C, int64_t ldc, cudaDataType_t ab,
             const float* bias) {
  LtEpilogue epi;
  if (bias != nullptr) epi = LtEpilogue{CUBLASLT_EPILOGUE_BIAS, bias};
  c.lt_gemm(tb, ta, N, M, K, alpha, B, ldb, A, lda, beta, C, ldc, ab, CUDA_R_32F, epi);
}

void cuda_gemm(BackendContext* c, bool ta, bool tb, int64_t M, int64_t N, int64_t K, float alpha, const float* A,
               int64_t lda, const float* B, int64_t ldb, float beta, float* C, int64_t ldc) {
  gemm_rm(cuda(c), ta, tb, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc, CUDA_R_32F, nullptr);
}

void cuda_linear_forward(BackendContext* c, float* y, const float* x, const float* W, const float* b, int64_t N,
                         int64_t I, int64_t O) {
  gemm_rm(cuda(c), false, true, N, O, I, 1.0f, x, I, W, I, 0.0f, y, O, CUDA_R_32F, b);
}

void cuda_linear_backward(BackendContext* c, float* dx, float* dW, float* db, const float* dy, const float* x,
                          const float* W, int64_t N, int64_t I, int64_t O, bool accumulate_dx) {
  CudaContext& cc = cuda(c);
  // dx, dW, db each skipped when null (ops.h).
  if (dx != nullptr) gemm_rm(cc, false, false, N, I, O, 1.0f, dy, O, W, I, accumulate_dx ? 1.0f : 0.0f, dx, I, CUDA_R_32F, nullptr);
  if (dW != nullptr) gemm_rm(cc, true, false, O, I, N, 1.0f, dy, O, x, I, 1.0f, dW, I, CUDA_R_32F, nullptr);
  if (db != nullptr) gpu::launch::column_sums(cc, db, dy, N, O);
}

void cuda_linear_forward_bf16(BackendContext* c, float* y, const uint16_t* x, const uint16_t* W, const float* b,
                              int64_t N, int64_t I, int64_t O) {
  gemm_rm(cuda(c), false, true, N, O, I, 1.0f, x, I, W, I, 0.0f, y, O, CUDA_R_16BF, b);
}

void cuda_linear_backward_bf16(BackendContext* c, float* dx, float* dW, float* db, const float* dy, const uint16_t* xb,
                               const uint16_t* W, int64_t N, int64_t I, int64_t O, bool accumulate_dx, uint16_t* cast) {
  CudaContext& cc = cuda(c);
  // dx, dW, db each skipped when null (ops.h); dy rounded for the products this call runs.
  uint16_t* dyb = cast;  // [N, O]
  if ((dx != nullptr || dW != nullptr) && !gpu::launch::cast(cc, dyb, DType::bf16, dy, DType::f32, N * O)) {
    cuda_fail("cast", "f32 to bf16");
  }
  if (dx != nullptr) {
    gemm_rm(cc, false, false, N, I, O, 1.0f, dyb, O, W, I, accumulate_dx ? 1.0f : 0.0f, dx, I, CUDA_R_16BF, nullptr);
  }
  if (dW != nullptr) gemm_rm(cc, true, false, O, I, N, 1.0f, dyb, O, xb, I, 1.0f, dW, I, CUDA_R_16BF, nullptr);
  if (db != nullptr) gpu::launch::column_sums(cc, db, dy, N, O);
}

// The MLP's first linear layer with GELU in cuBLASLt's epilogue
// (GELU_AUX_BIAS: act = gelu(y) into D, y into aux, both bf16, aux D's
// type as cuBLASLt documents). cuBLASLt's bias has D's type: b is rounded
// to bf16 first (O values, in scratch). Where cuBLASLt has no algorithm,
// the GEMM and a GELU pass (said in the GEMM report).
void cuda_linear_gelu_forward_bf16(BackendContext* c, uint16_t* act, uint16_t* pre, const uint16_t* x,
                                   const uint16_t* W, const float* b, int64_t N, int64_t I, int64_t O, float* work) {
  CudaContext& cc = cuda(c);
  if (N <= 0 || O <= 0) return;
  if (O % 8 == 0) {  // aux's leading dimension must be a multiple of 8
    LtEpilogue epi{CUBLASLT_EPILOGUE_GELU_AUX, nullptr, pre, O};
    if (b != nullptr) {
      auto* b16 = static_cast<uint16_t*>(cc.scratch(O * static_cast<int64_t>(sizeof(uint16_t))));
      if (!gpu::launch::cast(cc, b16, DType::bf16, b, DType::f32, O)) cuda_fail("cast", "f32 to bf16");
      epi.kind = CUBLASLT_EPILOGUE_GELU_AUX_BIAS;
      epi.bias = b16;
    }
    // Row-major act[N,O] = x[N,I] W[O,I]^T is col-major act^T[O,N] = W x^T.
    if (cc.lt_gemm(true, false, O, N, I, 1.0f, W, I, x, I, 0.0f, act, O, CUDA_R_16BF, CUDA_R_16BF, epi, true)) return;
  } else {
    cc.note_fallback("bf16 GEMM m=" + std::to_string(O) + " n=" + std::to_string(N) + " k=" + std::to_string(I) +
                         " epilogue GELU_AUX_BIAS",
                     "a GEMM and a GELU pass (the GELU matrix's width is not a multiple of 8)");
  }
  gpu::launch::linear_gelu_forward_bf16_passes(cc, cuda_linear_forward_bf16, act, pre, x, W, b, N, I, O, work);
}

// The MLP's output projection backward: the dx product into dpre, then the
// GELU-gradient pass (no epilogue: the file comment says why), so dpre does not depend on dW
// or db, which may be null (ops.h), and they are cuda_linear_backward_bf16's.
void cuda_linear_backward_gelu_bf16(BackendContext* c, float* dpre, float* dW, float* db, const float* dy,
                                    const uint16_t* xb, const uint16_t* W, const uint16_t* pre, int64_t N, int64_t I,
                                    int64_t O, uint16_t* cast) {
  gpu::launch::linear_backward_gelu_bf16_passes(cuda(c), cuda_linear_backward_bf16, dpre, dW, db, dy, xb, W, pre, N, I,
                                                O, cast);
}

}  // namespace

std::string cuda_device_status() { return gpu::runtime_device_status(); }
std::string cuda_device_name() { return gpu::runtime_device_name(); }

std::unique_ptr<Backend> make_cuda_backend() {
  auto ctx = std::make_shared<CudaContext>();
  BackendOps ops;
  gpu::launch::set_dialect_ops(ops);
  gpu::set_runtime_ops(ops);
  ops.gemm = cuda_gemm;
  ops.linear_forward = cuda_linear_forward;
  ops.linear_backward = cuda_linear_backward;
  ops.linear_forward_bf16 = cuda_linear_forward_bf16;
  ops.linear_backward_bf16 = cuda_linear_backward_bf16;
  ops.linear_gelu_forward_bf16 = cuda_linear_gelu_forward_bf16;
  ops.linear_backward_gelu_bf16 = cuda_linear_backward_gelu_bf16;
  ops.gemm_bf16_path = [](BackendContext*) -> std::string {
    return "cuBLASLt: bf16 inputs, fp32 accumulation (tensor cores)";
  };
  ops.gemm_report = [](BackendContext* c) { return cuda(c).report(); };
  // What the process still takes outside alloc once it runs: cuBLASLt's
  // workspace and handle, reduction scratch, and the CUDA runtime's module
  // images and context growth beyond what cudaSetDevice made: 32 MiB +
  // 256 MiB (an estimate; NCCL's buffers are the device communicators',
  // comm/device_comm.h).
  ops.memory_reserved = [](BackendContext*) -> int64_t { return (int64_t{32} + 256) << 20; };
  const DeviceAddressing addressing{DeviceAddressing::Kind::device, nullptr, static_cast<DeviceQueue*>(ctx.get())};
  return std::make_unique<Backend>("cuda", "cuBLASLt", addressing, ops, ctx);
}

}  // namespace tera
