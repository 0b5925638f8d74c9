// bf16 GEMM with fp32 accumulation and output (issue 17's GEMM path). Debian
// 12's oneDNN 2.6 has no bf16 entry in its BLAS-like C API (dnnl_sgemm and
// the int8 GEMMs only), so this runs its matmul primitive: bf16 source and
// weights, f32 destination, alpha as the output scale, beta as a sum
// post-op and a bias row in the epilogue (so a linear layer's y is written
// once, not filled with the bias first and read back). oneDNN picks AMX or AVX512-BF16 kernels where the CPU has them and
// emulates bf16 on plain AVX-512; where it has no bf16 matmul at all (no
// AVX-512), the inputs are widened to fp32 (exactly: a bf16 value is an fp32
// value) and multiplied by dnnl_sgemm, which gives the same result up to the
// order of the fp32 accumulation. Primitives are built once per shape and
// cached (creating one costs far more than a small product). A build without
// oneDNN (TERA_GPU_NODE) always takes the widening path (portable sgemm).
#if defined(TERA_HAVE_DNNL)
#include <dnnl.h>
#endif

#include <cstring>
#include <map>
#include <memory>
#include <mutex>
#include <tuple>
#include <vector>

#include "core/check.h"
#include "kernels/cpu/cpu_ops.h"

namespace tera::cpu {

namespace {

#if defined(TERA_HAVE_DNNL)
void check(dnnl_status_t st, const char* what) {
  TERA_ASSERT(st == dnnl_success, std::string("oneDNN ") + what + " failed with status " +
                                      std::to_string(static_cast<int>(st)));
}

dnnl_engine_t engine() {
  static dnnl_engine_t e = [] {
    dnnl_engine_t made = nullptr;
    check(dnnl_engine_create(&made, dnnl_cpu, 0), "engine creation");
    return made;
  }();
  return e;
}

// One stream per calling thread (in-process ranks call kernels concurrently).
dnnl_stream_t stream() {
  struct Owned {
    dnnl_stream_t s = nullptr;
    ~Owned() {
      if (s != nullptr) dnnl_stream_destroy(s);
    }
  };
  thread_local Owned owned;
  if (owned.s == nullptr) check(dnnl_stream_create(&owned.s, engine(), dnnl_stream_default_flags), "stream creation");
  return owned.s;
}

// A row-major [rows, cols] matrix with leading dimension ld, or its transpose.
dnnl_memory_desc_t matrix(int64_t rows, int64_t cols, int64_t ld, bool trans, dnnl_data_type_t t) {
  dnnl_memory_desc_t md;
  const dnnl_dims_t dims = {rows, cols};
  const dnnl_dims_t strides = {trans ? 1 : ld, trans ? ld : 1};
  check(dnnl_memory_desc_init_by_strides(&md, 2, dims, t, strides), "memory descriptor");
  return md;
}

struct Matmul {
  dnnl_primitive_t prim = nullptr;  // null: oneDNN has no bf16 matmul on this CPU
  dnnl_memory_desc_t a, b, c, bias;
  // The caller's scratchpad (dnnl_scratchpad_mode_user): the library's own is
  // one buffer shared by every execution, and in-process ranks run the same
  // cached primitive from several threads at once, which would race on it.
  dnnl_memory_desc_t scratch;
  size_t scratch_bytes = 0;
  ~Matmul() {
    if (prim != nullptr) dnnl_primitive_destroy(prim);
  }
};

using Key = std::tuple<bool, bool, int64_t, int64_t, int64_t, int64_t, int64_t, int64_t, float, float, bool>;

// The cached primitive for a shape (built on first use).
const Matmul& matmul_for(const Key& key) {
  static std::mutex mu;
  static std::map<Key, std::unique_ptr<Matmul>> cache;
  std::lock_guard<std::mutex> lock(mu);
  auto it = cache.find(key);
  if (it != cache.end()) return *it->second;
  const auto [ta, tb, M, N, K, lda, ldb, ldc, alpha, beta, has_bias] = key;
  auto m = std::make_unique<Matmul>();
  m->a = matrix(M, K, lda, ta, dnnl_bf16);
  m->b = matrix(K, N, ldb, tb, dnnl_bf16);
  m->c = matrix(M, N, ldc, false, dnnl_f32);
  m->bias = matrix(1, N, N, false, dnnl_f32);  // one row, broadcast over M
  dnnl_matmul_desc_t desc;
  check(dnnl_matmul_desc_init(&desc, &m->a, &m->b, has_bias ? &m->bias : nullptr, &m->c), "matmul descriptor");
  dnnl_primitive_attr_t attr = nullptr;
  check(dnnl_primitive_attr_create(&attr), "attribute creation");
  check(dnnl_primitive_attr_set_scratchpad_mode(attr, dnnl_scratchpad_mode_user), "scratchpad mode");
  if (alpha != 1.0f) check(dnnl_primitive_attr_set_output_scales(attr, 1, 0, &alpha), "output scale");
  dnnl_post_ops_t post = nullptr;
  if (beta != 0.0f) {
    check(dnnl_post_ops_create(&post), "post-op creation");
    check(dnnl_post_ops_append_sum(post, beta), "sum post-op");
    check(dnnl_primitive_attr_set_post_ops(attr, post), "post-ops");
  }
  dnnl_primitive_desc_t pd = nullptr;
  if (dnnl_primitive_desc_create(&pd, &desc, attr, engine(), nullptr) == dnnl_success) {
    check(dnnl_primitive_create(&m->prim, pd), "matmul primitive");
    m->scratch = *dnnl_primitive_desc_query_md(pd, dnnl_query_scratchpad_md, 0);
    m->scratch_bytes = dnnl_memory_desc_get_size(&m->scratch);
    dnnl_primitive_desc_destroy(pd);
  }
  if (post != nullptr) dnnl_post_ops_destroy(post);
  dnnl_primitive_attr_destroy(attr);
  return *cache.emplace(key, std::move(m)).first->second;
}

#endif  // TERA_HAVE_DNNL

float widen(uint16_t b) {
  const uint32_t u = static_cast<uint32_t>(b) << 16;
  float f;
  std::memcpy(&f, &u, sizeof f);
  return f;
}

// The fp32 fallback: widen the [rows, cols] operand (leading dimension ld) and sgemm.
std::vector<float> widened(const uint16_t* x, int64_t rows, int64_t ld) {
  std::vector<float> out(static_cast<size_t>(rows * ld));
#pragma omp parallel for schedule(static)
  for (int64_t i = 0; i < rows * ld; ++i) out[static_cast<size_t>(i)] = widen(x[i]);
  return out;
}

}  // namespace

void gemm_bf16(bool trans_a, bool trans_b, int64_t M, int64_t N, int64_t K, float alpha, const uint16_t* A,
               int64_t lda, const uint16_t* B, int64_t ldb, float beta, float* C, int64_t ldc, const float* bias) {
  if (M == 0 || N == 0) return;
  TERA_ASSERT(bias == nullptr || beta == 0.0f, "gemm_bf16: a bias with beta != 0");
#if defined(TERA_HAVE_DNNL)
  const Matmul& m = matmul_for(Key{trans_a, trans_b, M, N, K, lda, ldb, ldc, alpha, beta, bias != nullptr});
  const bool widen_inputs = m.prim == nullptr;
#else
  const bool widen_inputs = true;
#endif
  if (widen_inputs) {
    // Stored rows of A and B: op(A) is [M, K], so A holds trans_a ? K : M rows of lda.
    const std::vector<float> a = widened(A, trans_a ? K : M, lda), b = widened(B, trans_b ? N : K, ldb);
    if (bias != nullptr) {
      for (int64_t i = 0; i < M; ++i) std::memcpy(C + i * ldc, bias, static_cast<size_t>(N) * sizeof(float));
    }
    gemm<float>(trans_a, trans_b, M, N, K, alpha, a.data(), lda, b.data(), ldb, bias != nullptr ? 1.0f : beta, C, ldc);
    return;
  }
#if defined(TERA_HAVE_DNNL)
  dnnl_memory_t ma = nullptr, mb = nullptr, mc = nullptr, mbias = nullptr;
  check(dnnl_memory_create(&ma, &m.a, engine(), const_cast<uint16_t*>(A)), "memory A");
  check(dnnl_memory_create(&mb, &m.b, engine(), const_cast<uint16_t*>(B)), "memory B");
  check(dnnl_memory_create(&mc, &m.c, engine(), C), "memory C");
  std::vector<dnnl_exec_arg_t> args = {{DNNL_ARG_SRC, ma}, {DNNL_ARG_WEIGHTS, mb}, {DNNL_ARG_DST, mc}};
  if (bias != nullptr) {
    check(dnnl_memory_create(&mbias, &m.bias, engine(), const_cast<float*>(bias)), "memory bias");
    args.push_back({DNNL_ARG_BIAS, mbias});
  }
  dnnl_memory_t mscratch = nullptr;
  if (m.scratch_bytes > 0) {
    thread_local std::vector<uint8_t> scratch;  // this thread's, grown to the largest primitive's need
    if (scratch.size() < m.scratch_bytes) scratch.resize(m.scratch_bytes);
    check(dnnl_memory_create(&mscratch, &m.scratch, engine(), scratch.data()), "memory scratchpad");
    args.push_back({DNNL_ARG_SCRATCHPAD, mscratch});
  }
  check(dnnl_primitive_execute(m.prim, stream(), static_cast<int>(args.size()), args.data()), "matmul execution");
  check(dnnl_stream_wait(stream()), "stream wait");
  for (dnnl_memory_t mem : {ma, mb, mc, mbias, mscratch}) {
    if (mem != nullptr) dnnl_memory_destroy(mem);
  }
#endif
}

const char* gemm_bf16_path() {
#if !defined(TERA_HAVE_DNNL)
  return "fp32 fallback (built without oneDNN: inputs widened, portable sgemm)";
#else
  const Matmul& m = matmul_for(Key{false, false, 16, 16, 16, 16, 16, 16, 1.0f, 0.0f, false});
  if (m.prim == nullptr) return "fp32 fallback (oneDNN has no bf16 matmul on this CPU: inputs widened, dnnl_sgemm)";
  switch (dnnl_get_effective_cpu_isa()) {
    case dnnl_cpu_isa_avx512_core_amx: return "oneDNN matmul, AMX bf16 tiles";
    case dnnl_cpu_isa_avx512_core_bf16: return "oneDNN matmul, AVX512-BF16 dot products";
    default: return "oneDNN matmul, bf16 emulated on AVX-512 (no bf16 instructions)";
  }
#endif
}

}  // namespace tera::cpu
