// One typed buffer of a backend's device memory, for code that needs a
// handful of scratch tensors outside a rank's memory plan (benchmarks,
// calibration timings, tests): allocated through the backend, filled from
// the host or zeroed, read back by an explicit copy, released on scope exit.
#pragma once

#include <cstdint>
#include <utility>
#include <vector>

#include "core/arena.h"
#include "core/tensor.h"
#include "kernels/backend.h"

namespace tera {

template <typename T>
class DeviceBuffer {
 public:
  // n elements, zero-filled; throws AllocationError naming `what`.
  DeviceBuffer(const Backend& be, int64_t n, const char* what = "scratch") : be_(&be), n_(n) {
    if (n_ == 0) return;
    p_ = static_cast<T*>(be.alloc(n_ * static_cast<int64_t>(sizeof(T))));
    if (p_ == nullptr) {
      throw AllocationError("cannot allocate " + std::to_string(n_ * static_cast<int64_t>(sizeof(T))) + " bytes of " +
                            be.name + " memory for " + what);
    }
    be.fill(p_, dtype_of<T>(), 0.0, n_);
  }
  DeviceBuffer(const Backend& be, const std::vector<T>& host, const char* what = "scratch")
      : DeviceBuffer(be, static_cast<int64_t>(host.size()), what) {
    if (n_ > 0) be.copy(p_, host.data(), n_ * static_cast<int64_t>(sizeof(T)), CopyKind::host_to_device);
  }
  ~DeviceBuffer() {
    if (p_ != nullptr) be_->release(p_);
  }
  DeviceBuffer(DeviceBuffer&& o) noexcept : be_(o.be_), p_(std::exchange(o.p_, nullptr)), n_(o.n_) {}
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(DeviceBuffer&&) = delete;

  T* get() const { return p_; }  // device memory
  int64_t size() const { return n_; }
  std::vector<T> to_host() const {
    std::vector<T> h(static_cast<size_t>(n_));
    if (n_ > 0) be_->copy(h.data(), p_, n_ * static_cast<int64_t>(sizeof(T)), CopyKind::device_to_host);
    return h;
  }

 private:
  const Backend* be_;
  T* p_ = nullptr;
  int64_t n_ = 0;
};

}  // namespace tera
