// The device state a GPU runtime backend keeps (cuda, hip: one source,
// compiled by nvcc and by hipcc through gpu_runtime.h): a compute and a comm
// stream, events, the caching allocator over the runtime's allocations,
// reduction scratch, the pinned buffers host-to-device copies are staged in,
// and the device binding. Started on the current device at first use
// (after bind_device); a derived context adds its GEMM library
// (start_libraries). Every launch is checked; TERA_DEVICE_SYNC=1 also
// waits for each one.
#pragma once

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string>

#include "kernels/backend.h"
#include "kernels/caching_allocator.h"
#include "kernels/gpu/ops_launch.h"
#include "kernels/gpu/runtime/gpu_runtime.h"
#include "kernels/staged_uploads.h"

TERA_GPU_BEGIN

[[noreturn]] inline void runtime_fail(const std::string& what, const std::string& detail) {
  std::fprintf(stderr, "tera: error: %s backend: %s: %s\n", rt::kVendor, what.c_str(), detail.c_str());
  std::fflush(stderr);
  std::abort();
}

inline void runtime_check(rt::Error e, const char* what) {
  if (e != rt::kSuccess) runtime_fail(what, rt::error_string(e));
}

class RuntimeContext : public DeviceContext, public DeviceQueue {
 public:
  RuntimeContext() : cache_([this](int64_t b) { return raw_alloc(b); }, [this](void* p) { raw_free(p); }) {
    const char* sync = std::getenv("TERA_DEVICE_SYNC");
    sync_each_op_ = sync != nullptr && std::string(sync) == "1";
  }
  ~RuntimeContext() override {
    if (!started_) return;
    (void)rt::device_sync();  // teardown: errors have nowhere to go
    uploads_.reset();
    cache_.trim();
    if (scratch_ != nullptr) (void)rt::device_free(scratch_);
    (void)rt::stream_destroy(comm_);
    (void)rt::stream_destroy(stream);
  }

  // Streams and the derived context's libraries, on the current device.
  void start() {
    if (started_) return;
    started_ = true;
    runtime_check(rt::stream_create(&stream), "stream create (compute)");
    runtime_check(rt::stream_create(&comm_), "stream create (comm)");
    uploads_ = std::make_unique<StagedUploads>(*this);
    start_libraries();
  }
  bool sync_each_op() const { return sync_each_op_; }

  // --- DeviceContext ---------------------------------------------------
  void* scratch(int64_t bytes) override {
    if (bytes > scratch_bytes_) {
      if (scratch_ != nullptr) raw_free(scratch_);
      runtime_check(rt::device_alloc(&scratch_, static_cast<size_t>(bytes)), "device alloc (reduction scratch)");
      scratch_bytes_ = bytes;
    }
    return scratch_;
  }
  void launched(const char* kernel) override {
    if (const rt::Error e = rt::last_error(); e != rt::kSuccess) {
      runtime_fail(std::string("launch of ") + kernel, rt::error_string(e));
    }
    if (sync_each_op_) {
      if (const rt::Error e = rt::stream_sync(stream); e != rt::kSuccess) {
        runtime_fail(std::string("kernel ") + kernel + " (TERA_DEVICE_SYNC=1)", rt::error_string(e));
      }
    }
  }

  // --- DeviceQueue -----------------------------------------------------
  const char* vendor() const override { return rt::kVendor; }
  void* native_stream(DeviceStream s) override { return static_cast<void*>(on(s)); }
  Event event_create() override {
    start();
    rt::EventT e = nullptr;
    runtime_check(rt::event_create(&e), "event create");
    return e;
  }
  void event_destroy(Event e) override { (void)rt::event_destroy(static_cast<rt::EventT>(e)); }
  void event_record(Event e, DeviceStream s) override {
    runtime_check(rt::event_record(static_cast<rt::EventT>(e), on(s)), "event record");
  }
  void stream_wait(DeviceStream s, Event e) override {
    runtime_check(rt::stream_wait(on(s), static_cast<rt::EventT>(e)), "stream wait");
  }
  bool event_done(Event e) override {
    const rt::Error r = rt::event_query(static_cast<rt::EventT>(e));
    if (r == rt::kNotReady) return false;
    runtime_check(r, "event query");
    return true;
  }
  void event_wait(Event e) override { runtime_check(rt::event_sync(static_cast<rt::EventT>(e)), "event synchronize"); }
  void copy_async(void* dst, const void* src, int64_t bytes, CopyKind kind, DeviceStream s) override {
    if (bytes > 0) runtime_check(rt::copy_async(dst, src, static_cast<size_t>(bytes), kind, on(s)), "async copy");
  }
  void* pinned_alloc(int64_t bytes) override {
    start();
    void* p = nullptr;
    if (rt::pinned_alloc(&p, static_cast<size_t>(std::max<int64_t>(bytes, 1))) != rt::kSuccess) {
      (void)rt::last_error();
      return nullptr;
    }
    return p;
  }
  void pinned_free(void* p) override { (void)rt::pinned_free(p); }

  // --- the backend's memory and copies -----------------------------------
  void* alloc(int64_t bytes) {
    start();
    return cache_.allocate(bytes);
  }
  void release(void* p) {
    if (p == nullptr) return;
    if (!cache_.release(p)) runtime_fail("release", "a pointer this backend did not allocate");
  }
  int64_t cached_bytes() const { return cache_.stats().cached; }
  // ops.h's copy: host_to_device staged through pinned memory (no wait);
  // device_to_host waits for the stream.
  void copy(void* dst, const void* src, int64_t bytes, CopyKind kind) {
    start();
    if (bytes <= 0 || dst == src) return;
    if (kind == CopyKind::host_to_device && uploads_->upload(dst, src, bytes)) return;
    runtime_check(rt::copy_async(dst, src, static_cast<size_t>(bytes), kind, stream), "async copy");
    // A host buffer may be read or freed as soon as the call returns.
    if (kind != CopyKind::device_to_device) runtime_check(rt::stream_sync(stream), "stream synchronize (copy)");
  }
  void synchronize() {
    if (started_) runtime_check(rt::stream_sync(stream), "stream synchronize");
  }

 protected:
  virtual void start_libraries() {}

 private:
  rt::StreamT on(DeviceStream s) {
    start();
    return s == DeviceStream::compute ? stream : comm_;
  }
  // The raw allocation and free behind the caching allocator.
  void* raw_alloc(int64_t bytes) {
    void* p = nullptr;
    if (rt::device_alloc(&p, static_cast<size_t>(bytes)) != rt::kSuccess) {
      (void)rt::last_error();  // clear the out-of-memory error: the caller reports it
      return nullptr;
    }
    return p;
  }
  void raw_free(void* p) {
    runtime_check(rt::stream_sync(stream), "stream synchronize (release)");
    runtime_check(rt::stream_sync(comm_), "stream synchronize (release)");
    runtime_check(rt::device_free(p), "device free");
  }

  bool started_ = false;
  bool sync_each_op_ = false;
  rt::StreamT comm_ = nullptr;
  void* scratch_ = nullptr;
  int64_t scratch_bytes_ = 0;
  CachingAllocator cache_;
  std::unique_ptr<StagedUploads> uploads_;
};

inline RuntimeContext& runtime(BackendContext* c) {
  return *static_cast<RuntimeContext*>(static_cast<DeviceContext*>(c));
}

// "" when a device is usable, else why not in the runtime's words.
inline std::string runtime_device_status() {
  int n = 0;
  if (const rt::Error e = rt::device_count(&n); e != rt::kSuccess) {
    (void)rt::last_error();
    return std::string("no usable GPU: ") + rt::error_string(e);
  }
  if (n == 0) return std::string("no usable GPU: the ") + rt::kRuntime + " runtime reports no device";
  return "";
}

// The current device in words.
inline std::string runtime_device_name() {
  int device = 0;
  if (rt::get_device(&device) != rt::kSuccess) device = 0;
  return rt::device_description(device);
}

// The entries and hooks every runtime backend has the same way: memory,
// copies, fill and cast (the dialect's kernels), the device binding and
// identity, free memory, availability. The GEMMs are the backend's own.
inline void set_runtime_ops(BackendOps& ops) {
  ops.alloc = [](BackendContext* c, int64_t bytes) { return runtime(c).alloc(bytes); };
  ops.release = [](BackendContext* c, void* p) { runtime(c).release(p); };
  ops.fill = [](BackendContext* c, void* dst, DType t, double value, int64_t n) {
    if (!launch::fill(runtime(c), dst, t, value, n)) runtime_fail("fill", "f16 with a non-zero value");
  };
  ops.copy = [](BackendContext* c, void* dst, const void* src, int64_t bytes, CopyKind kind) {
    runtime(c).copy(dst, src, bytes, kind);
  };
  ops.synchronize = [](BackendContext* c) { runtime(c).synchronize(); };
  ops.cast = [](BackendContext* c, void* dst, DType dst_t, const void* src, DType src_t, int64_t n) {
    if (!launch::cast(runtime(c), dst, dst_t, src, src_t, n)) runtime_fail("cast", "a pair of dtypes it does not convert");
  };
  ops.unavailable = [](BackendContext*) { return runtime_device_status(); };
  // The device's free memory plus the blocks the cache would give back; 0
  // (unknown) if the runtime cannot say.
  ops.memory_available = [](BackendContext* c) -> int64_t {
    size_t free_bytes = 0, total_bytes = 0;
    if (rt::mem_info(&free_bytes, &total_bytes) != rt::kSuccess) {
      (void)rt::last_error();
      return 0;
    }
    return static_cast<int64_t>(free_bytes) + runtime(c).cached_bytes();
  };
  // The device of this rank (device_for_rank), made current for the process.
  ops.bind_device = [](BackendContext*, int local_rank, int local_size) -> std::string {
    int n = 0;
    if (const rt::Error e = rt::device_count(&n); e != rt::kSuccess) {
      (void)rt::last_error();
      return std::string("no usable GPU: ") + rt::error_string(e);
    }
    const int device = device_for_rank(local_rank, local_size, n);
    if (device < 0) return too_few_devices(local_size, n);
    if (const rt::Error e = rt::set_device(device); e != rt::kSuccess) {
      (void)rt::last_error();
      return "set device " + std::to_string(device) + ": " + rt::error_string(e);
    }
    return "";
  };
  // The current device's UUID as nvidia-smi prints it (GPU-8-4-4-4-12 hex).
  ops.device_identity = [](BackendContext*) -> std::string {
    int device = 0;
    unsigned char u[16];
    if (rt::get_device(&device) != rt::kSuccess || !rt::device_uuid(device, u)) {
      (void)rt::last_error();
      return "";
    }
    static const char* hex = "0123456789abcdef";
    std::string id = "GPU-";
    for (int i = 0; i < 16; ++i) {
      id += hex[u[i] >> 4];
      id += hex[u[i] & 15];
      if (i == 3 || i == 5 || i == 7 || i == 9) id += '-';
    }
    return id;
  };
}

TERA_GPU_END
