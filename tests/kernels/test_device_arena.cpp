// DeviceArena: one zero-filled allocation through the backend, typed views by
// name, an AllocationError naming the class when the memory is not there;
// and the cpu-guarded backend's promise: host code that touches its device
// memory faults, and an op handed host memory refuses it.
#include <gtest/gtest.h>

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "kernels/backend.h"
#include "kernels/backend_registry.h"
#include "kernels/device_arena.h"

// An impossible allocation must return null under AddressSanitizer too (its
// default is to abort), so the exhaustion test runs in the asan preset.
extern "C" const char* __asan_default_options() { return "allocator_may_return_null=1"; }

namespace tera {
namespace {

class DeviceArenaTest : public ::testing::TestWithParam<const char*> {
 protected:
  void SetUp() override { backend_ = std::move(*make_backend(GetParam())); }
  const Backend& be() const { return *backend_; }
  std::unique_ptr<Backend> backend_;
};

TEST_P(DeviceArenaTest, ViewsAreTypedAlignedAndZeroFilled) {
  ArenaLayout layout("activations");
  layout.add("x", DType::f32, 17, 3);
  layout.add("tokens", DType::i32, 5);
  layout.add("scalars", DType::f64, 4);
  DeviceArena arena(be(), layout);
  EXPECT_EQ(arena.bytes(), layout.total_bytes());
  float* x1 = arena.get<float>("x", 1);
  float* x2 = arena.get<float>("x", 2);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(x1) % 64, 0u);
  EXPECT_EQ(reinterpret_cast<char*>(x2) - reinterpret_cast<char*>(x1), 128);  // 17 floats -> 128 bytes
  EXPECT_EQ(arena.get<float>("absent"), nullptr);
  EXPECT_EQ(arena.count("x"), 17);
  // Zero-filled, read back through an explicit copy.
  std::vector<uint8_t> host(static_cast<size_t>(arena.bytes()), 0xff);
  be().copy(host.data(), arena.get<float>("x", 0), arena.bytes(), CopyKind::device_to_host);  // x is first
  for (uint8_t b : host) ASSERT_EQ(b, 0);
  // A view of the wrong type is a programming error.
  EXPECT_DEATH(arena.get<double>("x"), "holds f32, read as f64");
}

TEST_P(DeviceArenaTest, ImpossibleSizeThrowsAllocationErrorNamingTheClass) {
  ArenaLayout layout("optimizer state");
  layout.add("adam_m", DType::f32, int64_t{1} << 60);  // 4 EiB
  try {
    DeviceArena arena(be(), layout);
    FAIL() << "an arena of " << layout.total_bytes() << " bytes was allocated";
  } catch (const AllocationError& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find("optimizer state arena"), std::string::npos) << what;
    EXPECT_NE(what.find(std::to_string(layout.total_bytes())), std::string::npos) << what;
  }
}

INSTANTIATE_TEST_SUITE_P(Backends, DeviceArenaTest, ::testing::Values("cpu", "cpu-guarded"));

TEST(GuardedBackend, HostReadOrWriteOfDeviceMemoryFaults) {
  const auto guarded = make_cpu_guarded_backend();
  const Backend& be = *guarded;
  ArenaLayout layout("parameters");
  layout.add("params", DType::f32, 64);
  DeviceArena arena(be, layout);
  float* p = arena.get<float>("params");
  // The deliberate bugs a GPU backend would crash on: both are caught.
  EXPECT_DEATH({ *static_cast<volatile float*>(p + 3) = 1.0f; }, "");
  EXPECT_DEATH({ volatile float v = *static_cast<volatile float*>(p + 5); (void)v; }, "");
  // The same memory through the backend works.
  const float one = 1.0f;
  be.copy(p + 3, &one, sizeof one, CopyKind::host_to_device);
  float back = 0;
  be.copy(&back, p + 3, sizeof back, CopyKind::device_to_host);
  EXPECT_EQ(back, 1.0f);
}

TEST(GuardedBackend, OpsRefuseHostMemoryAndCopiesTheWrongDirection) {
  const auto guarded = make_cpu_guarded_backend();
  const Backend& be = *guarded;
  ArenaLayout layout("workspace");
  layout.add("x", DType::f32, 8);
  DeviceArena arena(be, layout);
  float* dev = arena.get<float>("x");
  std::vector<float> host(8, 1.0f);
  EXPECT_DEATH(be.residual_forward(dev, dev, host.data(), 8), "given a host pointer where device memory is expected");
  // Either side of a copy in the wrong direction is refused (which one the
  // message names first depends on argument evaluation order).
  EXPECT_DEATH(be.copy(host.data(), dev, 32, CopyKind::host_to_device), "cpu-guarded: copy host_to_device");
  EXPECT_DEATH(be.copy(dev, host.data(), 32, CopyKind::device_to_host), "cpu-guarded: copy device_to_host");
}

}  // namespace
}  // namespace tera
