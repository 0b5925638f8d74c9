// The SIMT emulator (kernels/gpu/emu/) gives the kernel dialect a GPU's
// semantics: block_sync orders shared-memory writes before reads, warp
// exchanges see every lane's value at warp 32 and 64, and the bugs a GPU
// would hang or corrupt on are reported as deadlocks that abort.
#include <gtest/gtest.h>

#include <memory>
#include <numeric>
#include <vector>

#include "kernels/gpu/dialect.h"
#include "kernels/gpu/emu/backend_gpu_emu.h"

namespace tera::gpu {
namespace {

// out[t] = t' where t' = block_dim - 1 - t, read through shared memory
// written by the other thread: wrong without the barrier (the emulator runs
// thread 0 until it blocks, before thread n-1 has written).
TERA_KERNEL reverse_k(int* out) {
  TERA_SHARED(int, s, 256);
  s[thread_x()] = thread_x();
  block_sync();
  out[block_x() * block_dim_x() + thread_x()] = s[block_dim_x() - 1 - thread_x()];
}

TERA_KERNEL warp_sums_k(int* out) {
  const int v = warp_sum(lane_id());
  const float m = warp_max(static_cast<float>(thread_x()));
  out[thread_x()] = v * 10000 + static_cast<int>(m);
}

TERA_KERNEL block_sum_k(double* out) {
  TERA_SHARED(double, scratch, 1024 / 32);
  const double s = block_sum(static_cast<double>(thread_x() + 1), scratch);
  if (thread_x() == 0) out[block_x()] = s;
}

TERA_KERNEL barrier_in_branch_k(int* out) {
  if (thread_x() < 16) {
    block_sync();
  }
  out[thread_x()] = 1;
}

TERA_KERNEL shuffle_in_branch_k(float* out) {
  float v = static_cast<float>(thread_x());
  if (lane_id() < 8) v = warp_sum(v);
  out[thread_x()] = v;
}

TERA_KERNEL two_barriers_k(int* out) {
  if (thread_x() % 2 == 0) {
    block_sync();
  } else {
    block_sync();
  }
  out[thread_x()] = 1;
}

// A gpu-emu instance at the test's warp width; ctx is what TERA_LAUNCH
// queues on (its compute stream).
struct Device {
  explicit Device(int warp) : owned(make_gpu_emu_backend(GpuEmuOptions{.warp = warp})), be(*owned) {
    ctx.stream = &gpu_emu_compute_stream(be);
  }
  ~Device() {
    for (void* p : allocated) be.release(p);
  }
  std::unique_ptr<Backend> owned;
  const Backend& be;
  struct {
    emu::Stream* stream = nullptr;
  } ctx;
  std::vector<void*> allocated;  // released with the device (LeakSanitizer)
  template <typename T>
  T* alloc(int64_t n) {
    allocated.push_back(be.alloc(n * static_cast<int64_t>(sizeof(T))));
    return static_cast<T*>(allocated.back());
  }
  template <typename T>
  std::vector<T> host(const T* d, int64_t n) {
    std::vector<T> h(static_cast<size_t>(n));
    be.copy(h.data(), d, n * static_cast<int64_t>(sizeof(T)), CopyKind::device_to_host);
    return h;
  }
};

class GpuEmu : public ::testing::TestWithParam<int> {};

TEST_P(GpuEmu, BarrierOrdersSharedMemory) {
  Device d(GetParam());
  int* out = d.alloc<int>(3 * 256);
  TERA_LAUNCH(d.ctx, reverse_k, (Dim{3, 1}), 256, 0, out);
  const auto h = d.host(out, 3 * 256);
  for (int b = 0; b < 3; ++b)
    for (int t = 0; t < 256; ++t) ASSERT_EQ(h[b * 256 + t], 255 - t);
}

TEST_P(GpuEmu, WarpReductionsSeeEveryLane) {
  Device d(GetParam());
  const int ws = GetParam();
  int* out = d.alloc<int>(128);
  TERA_LAUNCH(d.ctx, warp_sums_k, (Dim{1, 1}), 128, 0, out);
  const auto h = d.host(out, 128);
  for (int t = 0; t < 128; ++t) {
    const int warp_last = (t / ws + 1) * ws - 1;
    ASSERT_EQ(h[t], (ws * (ws - 1) / 2) * 10000 + warp_last) << "thread " << t;
  }
}

TEST_P(GpuEmu, BlockSumIsExactOnIntegers) {
  Device d(GetParam());
  double* out = d.alloc<double>(2);
  for (int threads : {64, 256, 1024}) {
    TERA_LAUNCH(d.ctx, block_sum_k, (Dim{2, 1}), threads, 0, out);
    const auto h = d.host(out, 2);
    EXPECT_EQ(h[0], threads * (threads + 1) / 2.0);
    EXPECT_EQ(h[1], h[0]);
  }
}

// The stream runs kernels on a worker thread, which a forked child would
// lack: each death test runs in a fresh process (threadsafe style).
class GpuEmuDeathTest : public GpuEmu {
 protected:
  void SetUp() override { GTEST_FLAG_SET(death_test_style, "threadsafe"); }
};

// Runs `launch` and waits for its kernel on the stream's worker (where a
// deadlock is found and the process aborts).
template <typename F>
void launch_and_wait(Device& d, F launch) {
  launch();
  d.ctx.stream->synchronize();
}

TEST_P(GpuEmuDeathTest, BarrierNotReachedByEveryThreadIsADeadlock) {
  Device d(GetParam());
  int* out = d.alloc<int>(64);
  EXPECT_DEATH(launch_and_wait(d, [&] { TERA_LAUNCH(d.ctx, barrier_in_branch_k, (Dim{1, 1}), 64, 0, out); }),
               "deadlock: a barrier not reached by every thread.*barrier_in_branch_k");
}

TEST_P(GpuEmuDeathTest, ShuffleInDivergentCodeIsADeadlock) {
  Device d(GetParam());
  float* out = d.alloc<float>(64);
  EXPECT_DEATH(launch_and_wait(d, [&] { TERA_LAUNCH(d.ctx, shuffle_in_branch_k, (Dim{1, 1}), 64, 0, out); }),
               "deadlock: a full-warp shuffle in divergent code.*shuffle_in_branch_k");
}

TEST_P(GpuEmuDeathTest, TwoDifferentBarriersAreReported) {
  Device d(GetParam());
  int* out = d.alloc<int>(64);
  EXPECT_DEATH(launch_and_wait(d, [&] { TERA_LAUNCH(d.ctx, two_barriers_k, (Dim{1, 1}), 64, 0, out); }),
               "two different barriers");
}

TEST_P(GpuEmuDeathTest, HostPointerGivenToAKernelIsRefused) {
  std::vector<int> host(256);
  Device d(GetParam());
  EXPECT_DEATH(TERA_LAUNCH(d.ctx, reverse_k, (Dim{1, 1}), 256, 0, host.data()), "given a host pointer");
}

TEST_P(GpuEmuDeathTest, DeviceMemoryFaultsOnHostAccess) {
  Device d(GetParam());
  int* out = d.alloc<int>(4);
  EXPECT_DEATH(out[0] = 1, "");
}

INSTANTIATE_TEST_SUITE_P(Warp, GpuEmu, ::testing::Values(32, 64));
INSTANTIATE_TEST_SUITE_P(Warp, GpuEmuDeathTest, ::testing::Values(32, 64));

}  // namespace
}  // namespace tera::gpu
