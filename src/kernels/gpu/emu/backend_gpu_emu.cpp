// The gpu-emu backend (backend_gpu_emu.h): an EmuContext per instance holds
// the emulated device (its memory, two streams, scratch) and is both the
// ops' DeviceContext and the device communicators' DeviceQueue.
#include "kernels/gpu/emu/backend_gpu_emu.h"

#include <omp.h>
#include <unistd.h>

#include <algorithm>
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
#include "kernels/staged_uploads.h"

namespace tera {

namespace {

using gpu::emu::Stream;

bool is_device(const void* p) { return (reinterpret_cast<uintptr_t>(p) & gpu::emu::kDeviceBit) != 0; }

template <typename T>
T* host_of(T* p, const char* op) {
  if (p == nullptr) return nullptr;
  TERA_ASSERT(is_device(p), std::string("gpu-emu: ") + op + " was given a host pointer where device memory is expected");
  return static_cast<T*>(gpu::emu::kernel_address(p, op));
}

template <typename T>
T* checked_host(T* p, const char* op) {
  TERA_ASSERT(p == nullptr || !is_device(p),
              std::string("gpu-emu: ") + op + " was given device memory where a host pointer is expected");
  return p;
}

// A recorded point of a stream: done once the stream has run work `seq`.
struct EmuEvent {
  Stream* stream = nullptr;  // null: never recorded (done)
  uint64_t seq = 0;
};

class EmuContext final : public gpu::DeviceContext, public DeviceQueue {
 public:
  explicit EmuContext(const GpuEmuOptions& o)
      : options_(o),
        compute_(std::make_unique<Stream>("compute", o.warp, o.mode)),
        comm_(std::make_unique<Stream>("comm", o.warp, o.mode)),
        cache_([this](int64_t b) { return raw_alloc(b); }, [this](void* p) { raw_free(p); }) {
    stream = compute_.get();
    warp = o.warp;
    uploads_ = std::make_unique<StagedUploads>(*this);
  }
  ~EmuContext() override {
    uploads_.reset();
    synchronize_all();
    if (scratch_ != nullptr) raw_free(scratch_);
    cache_.trim();
  }

  // --- DeviceContext ---------------------------------------------------
  void* scratch(int64_t bytes) override {
    if (bytes > scratch_bytes_) {
      // The queued work may still read the old block.
      synchronize_all();
      if (scratch_ != nullptr) raw_free(scratch_);
      scratch_ = raw_alloc(bytes);
      TERA_ASSERT(scratch_ != nullptr, "gpu-emu: no device memory left for " + std::to_string(bytes) +
                                           " bytes of reduction scratch");
      scratch_bytes_ = bytes;
    }
    return scratch_;
  }

  // --- DeviceQueue -----------------------------------------------------
  const char* vendor() const override { return ""; }
  void* native_stream(DeviceStream) override { return nullptr; }
  bool emulated() const override { return true; }
  Event event_create() override { return new EmuEvent; }
  void event_destroy(Event e) override { delete static_cast<EmuEvent*>(e); }
  void event_record(Event e, DeviceStream s) override {
    auto* ev = static_cast<EmuEvent*>(e);
    ev->stream = &on(s);
    ev->seq = ev->stream->issued();
  }
  void stream_wait(DeviceStream s, Event e) override {
    const EmuEvent ev = *static_cast<EmuEvent*>(e);
    if (ev.stream == nullptr || ev.stream == &on(s) || ev.seq == 0) return;  // already ordered
    on(s).enqueue([ev] { ev.stream->wait(ev.seq); });
  }
  bool event_done(Event e) override {
    const auto* ev = static_cast<const EmuEvent*>(e);
    return ev->stream == nullptr || ev->stream->done(ev->seq);
  }
  void event_wait(Event e) override {
    const auto* ev = static_cast<const EmuEvent*>(e);
    if (ev->stream != nullptr) ev->stream->wait(ev->seq);
  }
  void copy_async(void* dst, const void* src, int64_t bytes, CopyKind kind, DeviceStream s) override {
    if (bytes <= 0) return;
    void* d = side(dst, kind != CopyKind::device_to_host, "copy_async");
    const void* from = side(src, kind != CopyKind::host_to_device, "copy_async");
    on(s).enqueue([d, from, bytes] { std::memcpy(d, from, static_cast<size_t>(bytes)); });
  }
  void* pinned_alloc(int64_t bytes) override { return cpu::alloc(std::max<int64_t>(bytes, 1)); }
  void pinned_free(void* p) override { cpu::release(p); }

  // --- the backend's memory and copies -----------------------------------
  void* alloc(int64_t bytes) {
    void* p = cache_.allocate(bytes);
    // Fresh device memory holds garbage on a GPU, and a reused block its
    // last owner's data: NaN bytes here, written in stream order (the block's
    // last owner's queued work may still read it).
    if (p != nullptr) {
      void* h = host_of(p, "alloc");
      compute_->enqueue([h, bytes] { std::memset(h, 0xff, static_cast<size_t>(bytes)); });
    }
    return p;
  }
  void release(void* p) {
    if (p == nullptr) return;
    (void)host_of(p, "release");  // a host pointer is a bug
    TERA_ASSERT(cache_.release(p), "gpu-emu: release of device memory this backend did not allocate");
  }
  // The capacity left, counting cached blocks as free (the cache gives them
  // back before an allocation fails); 0 (unknown) when unlimited.
  int64_t memory_available() {
    const int64_t cached = cache_.stats().cached;
    std::lock_guard<std::mutex> lock(mu_);
    if (options_.memory < 0) return 0;
    return std::max<int64_t>(1, options_.memory - used_ + cached);
  }
  // ops.h's copy, as the cuda backend makes it: host_to_device staged
  // through pinned buffers (StagedUploads) and not waited for, or, past a
  // buffer's size, queued and waited for; device_to_host waits for the stream.
  void copy(void* dst, const void* src, int64_t bytes, CopyKind kind) {
    if (bytes <= 0) return;
    void* d = side(dst, kind != CopyKind::device_to_host, "copy");
    const void* s = side(src, kind != CopyKind::host_to_device, "copy");
    if (kind == CopyKind::host_to_device && uploads_->upload(dst, src, bytes)) return;
    if (kind == CopyKind::device_to_device) {
      if (d != s) compute_->enqueue([d, s, bytes] { std::memmove(d, s, static_cast<size_t>(bytes)); });
      return;
    }
    compute_->enqueue([d, s, bytes] { std::memcpy(d, s, static_cast<size_t>(bytes)); });
    compute_->synchronize();  // the host's side may be reused (or read) as soon as copy returns
  }
  // Queues host work (a host GEMM standing in for cuBLASLt) on the compute
  // stream with the OpenMP threads of the rank that queued it.
  void enqueue_host(std::function<void()> f) {
    const int threads = omp_get_max_threads();
    compute_->enqueue([threads, f = std::move(f)] {
      omp_set_num_threads(threads);
      f();
    });
  }
  void synchronize_all() {
    comm_->synchronize();
    compute_->synchronize();
  }
  Stream& compute() { return *compute_; }

  // --- the emulated node's GPUs --------------------------------------------
  // Each rank binds one as the cuda backend does (device_for_rank); its
  // identity names the node and the index, so ranks shown the same single
  // GPU share an identity.
  std::string bind_device(int local_rank, int local_size) {
    const int visible = options_.visible_gpus > 0 ? options_.visible_gpus : local_size;
    const int device = device_for_rank(local_rank, local_size, visible);
    if (device < 0) return too_few_devices(local_size, visible);
    bound_device_ = device;
    return "";
  }
  std::string device_identity() const {
    if (bound_device_ < 0) return "";
    char host[256] = "localhost";
    gethostname(host, sizeof(host) - 1);
    return std::string("gpu-emu:") + host + ":" + std::to_string(bound_device_);
  }

 private:
  Stream& on(DeviceStream s) { return s == DeviceStream::compute ? *compute_ : *comm_; }
  // The host address of one side of a copy: device memory where `device`.
  static void* side(const void* p, bool device, const char* op) {
    return device ? host_of(const_cast<void*>(p), op) : checked_host(const_cast<void*>(p), op);
  }
  // The emulated device's raw allocation and free (the caching allocator's):
  // an allocation past options_.memory fails as cudaMalloc does on a full GPU.
  void* raw_alloc(int64_t bytes) {
    std::lock_guard<std::mutex> lock(mu_);
    if (options_.memory >= 0 && used_ + bytes > options_.memory) return nullptr;
    void* p = cpu::alloc(bytes);
    if (p == nullptr) return nullptr;
    TERA_ASSERT(!is_device(p), "gpu-emu: the host allocator returned an address with the device bit set");
    sizes_[p] = bytes;
    used_ += bytes;
    return reinterpret_cast<void*>(reinterpret_cast<uintptr_t>(p) | gpu::emu::kDeviceBit);
  }
  void raw_free(void* p) {
    synchronize_all();  // as cudaFree waits for the device
    void* h = host_of(p, "release");
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (auto it = sizes_.find(h); it != sizes_.end()) {
        used_ -= it->second;
        sizes_.erase(it);
      }
    }
    cpu::release(h);
  }

  GpuEmuOptions options_;
  std::unique_ptr<Stream> compute_, comm_;
  std::mutex mu_;
  std::unordered_map<const void*, int64_t> sizes_;  // raw blocks (host address) -> bytes
  int64_t used_ = 0;
  CachingAllocator cache_;
  void* scratch_ = nullptr;
  int64_t scratch_bytes_ = 0;
  int bound_device_ = -1;
  std::unique_ptr<StagedUploads> uploads_;
};

EmuContext& emu(BackendContext* c) { return *static_cast<EmuContext*>(static_cast<gpu::DeviceContext*>(c)); }

// GEMMs: host libraries over the memory behind the device pointers, queued;
// the bias gradient by the dialect's column sums, as on cuda. A null output
// of a linear backward (ops.h) stays null (host_of) and the CPU kernel
// skips its product.
void emu_gemm(BackendContext* c, bool ta, bool tb, int64_t M, int64_t N, int64_t K, float alpha, const float* A,
              int64_t lda, const float* B, int64_t ldb, float beta, float* C, int64_t ldc) {
  const float *a = host_of(A, "gemm"), *b = host_of(B, "gemm");
  float* out = host_of(C, "gemm");
  emu(c).enqueue_host([=] { cpu::gemm<float>(ta, tb, M, N, K, alpha, a, lda, b, ldb, beta, out, ldc); });
}
void emu_linear_forward(BackendContext* c, float* y, const float* x, const float* W, const float* b, int64_t N,
                        int64_t I, int64_t O) {
  const char* op = "linear_forward";
  float* hy = host_of(y, op);
  const float *hx = host_of(x, op), *hW = host_of(W, op), *hb = host_of(b, op);
  emu(c).enqueue_host([=] { cpu::linear_forward<float>(hy, hx, hW, hb, N, I, O); });
}
void emu_linear_backward(BackendContext* c, float* dx, float* dW, float* db, const float* dy, const float* x,
                         const float* W, int64_t N, int64_t I, int64_t O, bool accumulate_dx) {
  const char* op = "linear_backward";
  float *hdx = host_of(dx, op), *hdW = host_of(dW, op);
  const float *hdy = host_of(dy, op), *hx = host_of(x, op), *hW = host_of(W, op);
  emu(c).enqueue_host([=] { cpu::linear_backward<float>(hdx, hdW, nullptr, hdy, hx, hW, N, I, O, accumulate_dx); });
  if (db != nullptr) gpu::launch::column_sums(emu(c), db, dy, N, O);  // the cuda backend's kernel
}
void emu_linear_forward_bf16(BackendContext* c, float* y, const uint16_t* x, const uint16_t* W, const float* b,
                             int64_t N, int64_t I, int64_t O) {
  const char* op = "linear_forward_bf16";
  float* hy = host_of(y, op);
  const uint16_t *hx = host_of(x, op), *hW = host_of(W, op);
  const float* hb = host_of(b, op);
  emu(c).enqueue_host([=] { cpu::linear_forward_bf16(hy, hx, hW, hb, N, I, O); });
}
void emu_linear_backward_bf16(BackendContext* c, float* dx, float* dW, float* db, const float* dy, const uint16_t* x,
                              const uint16_t* W, int64_t N, int64_t I, int64_t O, bool accumulate_dx, uint16_t* cast) {
  const char* op = "linear_backward_bf16";
  float *hdx = host_of(dx, op), *hdW = host_of(dW, op);
  const float* hdy = host_of(dy, op);
  const uint16_t *hx = host_of(x, op), *hW = host_of(W, op);
  uint16_t* hcast = host_of(cast, op);
  emu(c).enqueue_host([=] { cpu::linear_backward_bf16(hdx, hdW, nullptr, hdy, hx, hW, N, I, O, accumulate_dx, hcast); });
  if (db != nullptr) gpu::launch::column_sums(emu(c), db, dy, N, O);  // the cuda backend's kernel
}

// The GELU runs as its own pass after the host GEMM (the cuda backend's form
// where cuBLASLt refuses the epilogue).
void emu_linear_gelu_forward_bf16(BackendContext* c, uint16_t* act, uint16_t* pre, const uint16_t* x, const uint16_t* W,
                                  const float* b, int64_t N, int64_t I, int64_t O, float* work) {
  gpu::launch::linear_gelu_forward_bf16_passes(emu(c), emu_linear_forward_bf16, act, pre, x, W, b, N, I, O, work);
}
void emu_linear_backward_gelu_bf16(BackendContext* c, float* dpre, float* dW, float* db, const float* dy,
                                   const uint16_t* x, const uint16_t* W, const uint16_t* pre, int64_t N, int64_t I,
                                   int64_t O, uint16_t* cast) {
  gpu::launch::linear_backward_gelu_bf16_passes(emu(c), emu_linear_backward_bf16, dpre, dW, db, dy, x, W, pre, N, I,
                                                O, cast);
}

// TERA_GPU_EMU_MEMORY in bytes (suffix K, M, G or T: powers of 1024).
Expected<int64_t> parse_memory(const char* env) {
  char* end = nullptr;
  const long long n = std::strtoll(env, &end, 10);
  const std::string suffix(end);
  const int shift = suffix.empty() ? 0 : suffix == "K" ? 10 : suffix == "M" ? 20 : suffix == "G" ? 30 : suffix == "T" ? 40 : -1;
  if (end == env || n < 0 || shift < 0 || (shift > 0 && n > (int64_t{1} << (62 - shift)))) {
    return Status::error(std::string("TERA_GPU_EMU_MEMORY='") + env +
                         "' is not a size: give bytes with an optional K, M, G or T suffix (e.g. 512M), or unset it "
                         "for device memory as large as the host's");
  }
  return static_cast<int64_t>(n) << shift;
}

}  // namespace

Expected<GpuEmuOptions> gpu_emu_options_from_env() {
  GpuEmuOptions o;
  auto set = [](const char* name) -> const char* {
    const char* v = std::getenv(name);
    return v != nullptr && *v != '\0' ? v : nullptr;
  };
  if (const char* w = set("TERA_GPU_EMU_WARP")) {
    if (std::string(w) != "32" && std::string(w) != "64") {
      return Status::error(std::string("TERA_GPU_EMU_WARP='") + w +
                           "' is not a warp width: give 32 (NVIDIA's) or 64 (AMD's), or unset it for 32");
    }
    o.warp = std::atoi(w);
  }
  if (const char* m = set("TERA_GPU_EMU_MEMORY")) {
    auto bytes = parse_memory(m);
    if (!bytes) return bytes.status();
    o.memory = *bytes;
  }
  if (const char* g = set("TERA_GPU_EMU_GPUS")) {
    char* end = nullptr;
    const long n = std::strtol(g, &end, 10);
    if (*end != '\0' || end == g || n < 1 || n > 1024) {
      return Status::error(std::string("TERA_GPU_EMU_GPUS='") + g +
                           "' is not a GPU count: give 1 to 1024, or unset it for one emulated GPU per rank");
    }
    o.visible_gpus = static_cast<int>(n);
  }
  if (const char* s = set("TERA_GPU_EMU_STREAM")) {
    if (std::string(s) != "lazy" && std::string(s) != "eager") {
      return Status::error(std::string("TERA_GPU_EMU_STREAM='") + s +
                           "' is not a stream mode: give lazy (work runs only as far as something waits for it: the "
                           "default) or eager (as soon as queued)");
    }
    o.mode = std::string(s) == "eager" ? Stream::Mode::eager : Stream::Mode::lazy;
  }
  if (const char* g = set("TERA_GPU_EMU_GEMM")) {
    if (std::string(g) != "host" && std::string(g) != "tiles") {
      return Status::error(std::string("TERA_GPU_EMU_GEMM='") + g +
                           "' is not a GEMM path: give host (host GEMMs as cuBLASLt computes them: the default) or "
                           "tiles (the dialect's GEMM kernels, the hip backend's)");
    }
    o.tile_gemms = std::string(g) == "tiles";
  }
  return o;
}

std::unique_ptr<Backend> make_gpu_emu_backend(const GpuEmuOptions& options) {
  TERA_ASSERT(options.warp == 32 || options.warp == 64, "gpu-emu: the warp width is 32 or 64");
  auto ctx = std::make_shared<EmuContext>(options);
  BackendOps ops;
  gpu::launch::set_dialect_ops(ops);
  ops.alloc = [](BackendContext* c, int64_t bytes) { return emu(c).alloc(bytes); };
  ops.release = [](BackendContext* c, void* p) { emu(c).release(p); };
  ops.fill = [](BackendContext* c, void* dst, DType t, double value, int64_t n) {
    TERA_ASSERT(gpu::launch::fill(emu(c), dst, t, value, n), "gpu-emu: fill of f16 with a non-zero value");
  };
  ops.copy = [](BackendContext* c, void* dst, const void* src, int64_t bytes, CopyKind kind) {
    emu(c).copy(dst, src, bytes, kind);
  };
  ops.synchronize = [](BackendContext* c) { emu(c).synchronize_all(); };
  ops.cast = [](BackendContext* c, void* dst, DType dst_t, const void* src, DType src_t, int64_t n) {
    TERA_ASSERT(gpu::launch::cast(emu(c), dst, dst_t, src, src_t, n), "gpu-emu: cast between dtypes it does not convert");
  };
  ops.gemm = emu_gemm;
  ops.linear_forward = emu_linear_forward;
  ops.linear_backward = emu_linear_backward;
  ops.linear_forward_bf16 = emu_linear_forward_bf16;
  ops.linear_backward_bf16 = emu_linear_backward_bf16;
  ops.linear_gelu_forward_bf16 = emu_linear_gelu_forward_bf16;
  ops.linear_backward_gelu_bf16 = emu_linear_backward_gelu_bf16;
  ops.gemm_bf16_path = [](BackendContext*) -> std::string {
    return "gpu-emu: host GEMM, bf16 inputs, fp32 accumulation";
  };
  if (options.tile_gemms) {
    gpu::launch::set_tile_gemm_ops(ops);
    ops.gemm_bf16_path = [](BackendContext*) -> std::string {
      return "gpu-emu: the dialect's tile GEMM kernels (the hip backend's), bf16 inputs, fp32 accumulation";
    };
  }
  ops.memory_available = [](BackendContext* c) { return emu(c).memory_available(); };
  ops.bind_device = [](BackendContext* c, int local_rank, int local_size) {
    return emu(c).bind_device(local_rank, local_size);
  };
  ops.device_identity = [](BackendContext* c) { return emu(c).device_identity(); };
  const DeviceAddressing addressing{DeviceAddressing::Kind::device, nullptr, static_cast<DeviceQueue*>(ctx.get())};
  return std::make_unique<Backend>("gpu-emu", options.tile_gemms ? "the dialect's tile GEMMs (gpu-emu)" : "host GEMM (gpu-emu)",
                                   addressing, ops, ctx);
}

int64_t gpu_emu_launches(const Backend& be, const char* kernel) {
  return gpu_emu_compute_stream(be).launches(kernel);
}

gpu::emu::Stream& gpu_emu_compute_stream(const Backend& be) {
  TERA_ASSERT(std::string(be.name) == "gpu-emu", std::string("gpu_emu_compute_stream of the ") + be.name + " backend");
  return emu(be.context()).compute();
}

}  // namespace tera
