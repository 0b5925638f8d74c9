// The gpu-emu backend table (backend_gpu_emu.h): device memory with the
// emulator's device bit, the dialect kernels of ops_launch.h launched on the
// emulator, host GEMMs for the linear ops.
#include "kernels/gpu/emu/backend_gpu_emu.h"

#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <string>
#include <unordered_map>
#include <vector>

#include "core/check.h"
#include "kernels/caching_allocator.h"
#include "kernels/cpu/cpu_ops.h"
#include "kernels/gpu/emu/emulator.h"
#include "kernels/gpu/ops_launch.h"

namespace tera {

}  // namespace tera

TERA_GPU_BEGIN

// Partial results of the reductions: device memory, grown as needed.
void* scratch(int64_t bytes) {
  static thread_local void* buf = nullptr;
  static thread_local int64_t size = 0;
  if (bytes > size) {
    if (buf != nullptr) cpu::release(emu::kernel_address(buf, "scratch"));
    buf = reinterpret_cast<void*>(reinterpret_cast<uintptr_t>(cpu::alloc(bytes)) | emu::kDeviceBit);
    size = bytes;
  }
  return buf;
}

TERA_GPU_END

namespace tera {

namespace {

bool is_device(const void* p) { return (reinterpret_cast<uintptr_t>(p) & gpu::emu::kDeviceBit) != 0; }

template <typename T>
T* host_of(T* p, const char* op) {
  if (p == nullptr) return nullptr;
  TERA_ASSERT(is_device(p), std::string("gpu-emu: ") + op + " was given a host pointer where device memory is expected");
  return static_cast<T*>(gpu::emu::kernel_address(p, op));
}

void* to_host(const void* p) { return p == nullptr ? nullptr : host_of(const_cast<void*>(p), "the device communicator"); }

// The emulated device's memory: unlimited like the host's, or
// TERA_GPU_EMU_MEMORY bytes (suffix K, M, G or T: powers of 1024), which an
// allocation past it fails as cudaMalloc does on a full GPU. The reductions'
// scratch (gpu::scratch) is not counted.
// TERA_GPU_EMU_MEMORY in bytes; -1 when unset (unlimited).
int64_t emu_memory_capacity() {
  const char* env = std::getenv("TERA_GPU_EMU_MEMORY");
  if (env == nullptr || *env == '\0') return -1;
  char* end = nullptr;
  const long long n = std::strtoll(env, &end, 10);
  int64_t unit = 1;
  if (*end != '\0') {
    const std::string suffix(end);
    unit = suffix == "K" ? 1LL << 10 : suffix == "M" ? 1LL << 20 : suffix == "G" ? 1LL << 30 : suffix == "T" ? 1LL << 40 : 0;
  }
  if (end == env || n < 0 || unit == 0) {
    std::fprintf(stderr,
                 "tera: error: TERA_GPU_EMU_MEMORY='%s' is not a size: give bytes with an optional K, M, G or T "
                 "suffix (e.g. 512M), or unset it for unlimited device memory\n",
                 env);
    std::exit(2);
  }
  return static_cast<int64_t>(n) * unit;
}

struct DeviceMemory {
  std::mutex mu;
  std::unordered_map<const void*, int64_t> sizes;
  int64_t used = 0;
  int64_t capacity = emu_memory_capacity();  // -1: unlimited
};

DeviceMemory& device_memory() {
  static DeviceMemory m;
  return m;
}

// The emulated device's raw allocation and free (the caching allocator's).
void* emu_raw_alloc(int64_t bytes) {
  DeviceMemory& dm = device_memory();
  std::lock_guard<std::mutex> lock(dm.mu);
  if (dm.capacity >= 0 && dm.used + bytes > dm.capacity) return nullptr;
  void* p = cpu::alloc(bytes);
  if (p == nullptr) return nullptr;
  TERA_ASSERT(!is_device(p), "gpu-emu: the host allocator returned an address with the device bit set");
  dm.sizes[p] = bytes;
  dm.used += bytes;
  return reinterpret_cast<void*>(reinterpret_cast<uintptr_t>(p) | gpu::emu::kDeviceBit);
}

void emu_raw_free(void* p) {
  void* h = host_of(p, "release");
  DeviceMemory& dm = device_memory();
  {
    std::lock_guard<std::mutex> lock(dm.mu);
    if (auto it = dm.sizes.find(h); it != dm.sizes.end()) {
      dm.used -= it->second;
      dm.sizes.erase(it);
    }
  }
  cpu::release(h);
}

// Never destroyed: blocks may be released by other statics' destructors.
CachingAllocator& emu_cache() {
  static CachingAllocator* cache = new CachingAllocator(emu_raw_alloc, emu_raw_free);
  return *cache;
}

void* emu_alloc(int64_t bytes) {
  void* p = emu_cache().allocate(bytes);
  // Fresh device memory holds garbage on a GPU, and a reused block its last
  // owner's data: NaN bytes here, so a kernel that reads before writing shows it.
  if (p != nullptr) std::memset(host_of(p, "alloc"), 0xff, static_cast<size_t>(bytes));
  return p;
}

void emu_release(void* p) {
  if (p == nullptr) return;
  (void)host_of(p, "release");  // a host pointer is a bug
  TERA_ASSERT(emu_cache().release(p), "gpu-emu: release of device memory this backend did not allocate");
}

// The capacity left, counting cached blocks as free (the cache gives them
// back before an allocation fails).
int64_t emu_memory_available() {
  const int64_t cached = emu_cache().stats().cached;
  DeviceMemory& dm = device_memory();
  std::lock_guard<std::mutex> lock(dm.mu);
  if (dm.capacity < 0) return 0;  // unknown: unlimited
  return std::max<int64_t>(1, dm.capacity - dm.used + cached);
}

// The emulated node's GPUs, for testing how ranks are put on devices:
// TERA_GPU_EMU_GPUS devices visible to each process (as CUDA_VISIBLE_DEVICES
// would show them); unset, one per rank of the node. Each rank binds one as
// the cuda backend does (device_for_rank); its identity names the node and
// the index, so ranks shown the same single GPU share an identity.
int& emu_bound_device() {
  static int device = -1;
  return device;
}

std::string emu_bind_device(int local_rank, int local_size) {
  int visible = local_size;
  if (const char* env = std::getenv("TERA_GPU_EMU_GPUS"); env != nullptr && *env != '\0') {
    char* end = nullptr;
    const long n = std::strtol(env, &end, 10);
    if (*end != '\0' || n < 1 || n > 1024) {
      return std::string("TERA_GPU_EMU_GPUS='") + env + "' is not a GPU count: give 1 to 1024, or unset it for one "
             "emulated GPU per rank";
    }
    visible = static_cast<int>(n);
  }
  const int device = device_for_rank(local_rank, local_size, visible);
  if (device < 0) return too_few_devices(local_size, visible);
  emu_bound_device() = device;
  return "";
}

std::string emu_device_identity() {
  if (emu_bound_device() < 0) return "";
  char host[256] = "localhost";
  gethostname(host, sizeof(host) - 1);
  return std::string("gpu-emu:") + host + ":" + std::to_string(emu_bound_device());
}

void emu_copy(void* dst, const void* src, int64_t bytes, CopyKind kind) {
  const bool dst_dev = kind != CopyKind::device_to_host, src_dev = kind != CopyKind::host_to_device;
  TERA_ASSERT(is_device(dst) == dst_dev && is_device(src) == src_dev,
              "gpu-emu: copy given memory of the wrong side for its CopyKind");
  void* d = dst_dev ? host_of(dst, "copy") : dst;
  const void* s = src_dev ? host_of(src, "copy") : src;
  if (bytes > 0 && d != s) std::memcpy(d, s, static_cast<size_t>(bytes));
}

void emu_fill(void* dst, DType t, double value, int64_t n) {
  TERA_ASSERT(gpu::launch::fill(dst, t, value, n), "gpu-emu: fill of f16 with a non-zero value");
}

void emu_cast(void* dst, DType dst_t, const void* src, DType src_t, int64_t n) {
  TERA_ASSERT(gpu::launch::cast(dst, dst_t, src, src_t, n), "gpu-emu: cast between dtypes it does not convert");
}

// GEMMs: host libraries over the memory behind the device pointers.
void emu_gemm(bool ta, bool tb, int64_t M, int64_t N, int64_t K, float alpha, const float* A, int64_t lda,
              const float* B, int64_t ldb, float beta, float* C, int64_t ldc) {
  cpu::gemm<float>(ta, tb, M, N, K, alpha, host_of(A, "gemm"), lda, host_of(B, "gemm"), ldb, beta, host_of(C, "gemm"),
                   ldc);
}
void emu_linear_forward(float* y, const float* x, const float* W, const float* b, int64_t N, int64_t I, int64_t O) {
  cpu::linear_forward<float>(host_of(y, "linear_forward"), host_of(x, "linear_forward"),
                             host_of(W, "linear_forward"), host_of(b, "linear_forward"), N, I, O);
}
void emu_linear_backward(float* dx, float* dW, float* db, const float* dy, const float* x, const float* W, int64_t N,
                         int64_t I, int64_t O, bool accumulate_dx) {
  const char* op = "linear_backward";
  cpu::linear_backward<float>(host_of(dx, op), host_of(dW, op), host_of(db, op), host_of(dy, op), host_of(x, op),
                              host_of(W, op), N, I, O, accumulate_dx);
}
void emu_linear_forward_bf16(float* y, const uint16_t* x, const uint16_t* W, const float* b, int64_t N, int64_t I,
                             int64_t O) {
  const char* op = "linear_forward_bf16";
  cpu::linear_forward_bf16(host_of(y, op), host_of(x, op), host_of(W, op), host_of(b, op), N, I, O);
}
void emu_linear_backward_bf16(float* dx, float* dW, float* db, const float* dy, const uint16_t* x, const uint16_t* W,
                              int64_t N, int64_t I, int64_t O, bool accumulate_dx, uint16_t* cast) {
  const char* op = "linear_backward_bf16";
  cpu::linear_backward_bf16(host_of(dx, op), host_of(dW, op), host_of(db, op), host_of(dy, op), host_of(x, op),
                            host_of(W, op), N, I, O, accumulate_dx, host_of(cast, op));
}

// The GELU runs as its own pass after the host GEMM (the cuda backend's form
// where cuBLASLt refuses the epilogue).
void emu_linear_gelu_forward_bf16(uint16_t* act, uint16_t* pre, const uint16_t* x, const uint16_t* W, const float* b,
                                  int64_t N, int64_t I, int64_t O, float* work) {
  gpu::launch::linear_gelu_forward_bf16_passes(emu_linear_forward_bf16, act, pre, x, W, b, N, I, O, work);
}
void emu_linear_backward_gelu_bf16(float* dpre, float* dW, float* db, const float* dy, const uint16_t* x,
                                   const uint16_t* W, const uint16_t* pre, int64_t N, int64_t I, int64_t O,
                                   uint16_t* cast) {
  gpu::launch::linear_backward_gelu_bf16_passes(emu_linear_backward_bf16, dpre, dW, db, dy, x, W, pre, N, I, O, cast);
}

const char* emu_gemm_bf16_path() { return "gpu-emu: host GEMM, bf16 inputs, fp32 accumulation"; }

bool emu_supports(KernelOp op, DType dtype) {
  if (dtype == DType::f32) return true;
  return dtype == DType::bf16 && (kernel_op_need(op) == OpNeed::bf16 || op == KernelOp::fill ||
                                  op == KernelOp::tile_gemm_bf16 || op == KernelOp::linear_gelu_forward_bf16 ||
                                  op == KernelOp::linear_backward_gelu_bf16);
}

}  // namespace

const Backend& gpu_emu_backend() {
  // TERA_GPU_EMU_WARP=64 gives kernels AMD's warp width (gfx90a); 32 otherwise.
  static const bool warp_set = [] {
    const char* w = std::getenv("TERA_GPU_EMU_WARP");
    if (w != nullptr && std::string(w) == "64") gpu::emu::set_warp_size(64);
    return true;
  }();
  (void)warp_set;
  static const Backend backend = [] {
    Backend b{
        .name = "gpu-emu",
        .gemm_library = "host GEMM (gpu-emu)",
        .gemm_bf16_path = emu_gemm_bf16_path,
        .memory_available = emu_memory_available,
        .bind_device = emu_bind_device,
        .device_identity = emu_device_identity,
        .addressing = {DeviceAddressing::Kind::mapped_host, to_host},
        .alloc = emu_alloc,
        .release = emu_release,
        .fill = emu_fill,
        .copy = emu_copy,
        .gemm = emu_gemm,
        .linear_forward = emu_linear_forward,
        .linear_backward = emu_linear_backward,
        .linear_forward_bf16 = emu_linear_forward_bf16,
        .linear_backward_bf16 = emu_linear_backward_bf16,
        .linear_gelu_forward_bf16 = emu_linear_gelu_forward_bf16,
        .linear_backward_gelu_bf16 = emu_linear_backward_gelu_bf16,
        .cast = emu_cast,
        .supports = emu_supports,
    };
    gpu::launch::set_dialect_ops(b);
    return b;
  }();
  return backend;
}

}  // namespace tera
