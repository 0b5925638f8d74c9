// Device communicators by capability (comm/device_comm.h): which one a
// backend's memory gets and why not; the local one of a group of one rank;
// GPU-aware MPI's ordering (a host wait for the compute stream before each
// operation), with an in-process world and a device whose memory is host
// memory so that the host communicator can carry its pointers.
#include <gtest/gtest.h>

#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "comm/device_comm.h"
#include "comm/groups.h"
#include "comm/in_process_comm.h"
#include "kernels/gpu/emu/backend_gpu_emu.h"

namespace tera {
namespace {

// A device whose memory is the host's (so the in-process world can move it),
// counting the host waits; copies run at once.
class HostQueue final : public DeviceQueue {
 public:
  explicit HostQueue(const char* vendor) : vendor_(vendor) {}
  const char* vendor() const override { return vendor_; }
  void* native_stream(DeviceStream) override { return nullptr; }
  Event event_create() override { return new int(0); }
  void event_destroy(Event e) override { delete static_cast<int*>(e); }
  void event_record(Event, DeviceStream) override { ++records; }
  void stream_wait(DeviceStream, Event) override {}
  bool event_done(Event) override { return true; }
  void event_wait(Event) override { ++host_waits; }
  void copy_async(void* dst, const void* src, int64_t bytes, CopyKind, DeviceStream) override {
    std::memmove(dst, src, static_cast<size_t>(bytes));
  }
  void* pinned_alloc(int64_t bytes) override { return std::malloc(static_cast<size_t>(bytes)); }
  void pinned_free(void* p) override { std::free(p); }
  int records = 0, host_waits = 0;

 private:
  const char* vendor_;
};

DeviceAddressing device_memory(DeviceQueue& q) { return DeviceAddressing{DeviceAddressing::Kind::device, nullptr, &q}; }

TEST(DeviceComm, ChoiceFollowsTheMemoryAndTheBuild) {
  HostQueue emu(""), cuda("cuda");
  const DeviceCommOptions automatic;
  EXPECT_EQ(*choose_device_comm({}, automatic, "cpu"), DeviceCommKind::host);
  EXPECT_EQ(*choose_device_comm(device_memory(emu), automatic, "gpu-emu"), DeviceCommKind::staged);
  auto on_cuda = choose_device_comm(device_memory(cuda), automatic, "cuda");
  ASSERT_TRUE(on_cuda.ok());
  EXPECT_EQ(*on_cuda, vendor_collectives_built("cuda") ? DeviceCommKind::nccl : DeviceCommKind::staged);
  EXPECT_EQ(*choose_device_comm(device_memory(cuda), DeviceCommOptions{"staged"}, "cuda"), DeviceCommKind::staged);
  EXPECT_EQ(*choose_device_comm(device_memory(cuda), DeviceCommOptions{"mpi"}, "cuda"), DeviceCommKind::mpi);
  // Refusals name what is missing and the choices.
  const auto mpi_on_emu = choose_device_comm(device_memory(emu), DeviceCommOptions{"mpi"}, "gpu-emu");
  ASSERT_FALSE(mpi_on_emu.ok());
  EXPECT_NE(mpi_on_emu.error().find("emulated, so no MPI library can take its pointers"), std::string::npos)
      << mpi_on_emu.error();
  EXPECT_NE(mpi_on_emu.error().find("this build offers for it: staged"), std::string::npos) << mpi_on_emu.error();
  const auto nccl_on_emu = choose_device_comm(device_memory(emu), DeviceCommOptions{"nccl"}, "gpu-emu");
  ASSERT_FALSE(nccl_on_emu.ok());
  EXPECT_NE(nccl_on_emu.error().find("the gpu-emu backend's memory is not CUDA memory"), std::string::npos)
      << nccl_on_emu.error();
  const auto rccl_on_cuda = choose_device_comm(device_memory(cuda), DeviceCommOptions{"rccl"}, "cuda");
  ASSERT_FALSE(rccl_on_cuda.ok());
  EXPECT_NE(rccl_on_cuda.error().find("not HIP memory"), std::string::npos) << rccl_on_cuda.error();
  // hip: RCCL where built (never, in Debian 12), else staged.
  HostQueue hip("hip");
  EXPECT_EQ(*choose_device_comm(device_memory(hip), automatic, "hip"),
            vendor_collectives_built("hip") ? DeviceCommKind::rccl : DeviceCommKind::staged);
  if (!vendor_collectives_built("hip")) {
    const auto rccl = choose_device_comm(device_memory(hip), DeviceCommOptions{"rccl"}, "hip");
    ASSERT_FALSE(rccl.ok());
    EXPECT_NE(rccl.error().find("this binary was built without rccl; this build offers for it: staged"),
              std::string::npos)
        << rccl.error();
  }
  const auto typo = choose_device_comm(device_memory(cuda), DeviceCommOptions{"ncl"}, "cuda");
  ASSERT_FALSE(typo.ok());
  EXPECT_NE(typo.error().find("\"ncl\" is not a device communicator: give auto, nccl, rccl, mpi or staged"),
            std::string::npos);
}

// Process groups refuse, before making any group, a choice the memory cannot take.
TEST(DeviceComm, ProcessGroupsReturnTheRefusal) {
  HostQueue emu("");
  InProcessWorld world(1);
  auto comm = world.communicator(0);
  const auto groups = ProcessGroups::create(*comm, with_world_size(ParallelLayout{}, 1),
                                            DeviceCommSetup{"gpu-emu", device_memory(emu), DeviceCommOptions{"nccl"}});
  ASSERT_FALSE(groups.ok());
  EXPECT_NE(groups.error().find("train.device_comm = \"nccl\""), std::string::npos) << groups.error();
}

// A group of one rank needs no library: collectives are the identity, a
// result that lands apart from its input is a device copy.
TEST(DeviceComm, OneRankGroupsCopyOnTheDevice) {
  const auto be = make_gpu_emu_backend({});
  InProcessWorld world(1);
  auto host = world.communicator(0);
  DeviceCommContext ctx{be->addressing, DeviceCommKind::staged, {}, nullptr};
  auto made = make_device_communicator(*host, ctx);
  ASSERT_TRUE(made.ok()) << made.error();
  Communicator& c = **made;
  const int64_t n = 64;
  std::vector<float> h(n);
  for (int64_t i = 0; i < n; ++i) h[static_cast<size_t>(i)] = static_cast<float>(i);
  auto* a = static_cast<float*>(be->alloc(n * 4));
  auto* b = static_cast<float*>(be->alloc(n * 4));
  be->copy(a, h.data(), n * 4, CopyKind::host_to_device);
  c.all_reduce(a, n, CommType::f32, ReduceOp::sum);
  c.reduce_scatter(a, b, n, CommType::f32, ReduceOp::sum);
  std::vector<float> got(n);
  be->copy(got.data(), b, n * 4, CopyKind::device_to_host);
  EXPECT_EQ(got, h);
  be->fill(b, DType::f32, 0.0, n);
  c.all_gather(a, b, n, CommType::f32);
  be->copy(got.data(), b, n * 4, CopyKind::device_to_host);
  EXPECT_EQ(got, h);
  be->release(a);
  be->release(b);
}

// GPU-aware MPI: device pointers go to the host communicator, each operation
// after a host wait for the compute stream.
TEST(DeviceComm, GpuAwareMpiWaitsForTheComputeStreamFirst) {
  InProcessWorld::run(2, [](Communicator& world) {
    HostQueue q("cuda");
    DeviceCommContext ctx{device_memory(q), DeviceCommKind::mpi, {}, nullptr};
    auto made = make_device_communicator(world, ctx);
    ASSERT_TRUE(made.ok()) << made.error();
    Communicator& c = **made;
    std::vector<float> x(10, static_cast<float>(world.rank() + 1));
    c.all_reduce(x.data(), 10, CommType::f32, ReduceOp::sum);
    for (float v : x) EXPECT_EQ(v, 3.0f);
    std::vector<float> all(20);
    c.all_gather(x.data(), all.data(), 10, CommType::f32);
    for (float v : all) EXPECT_EQ(v, 3.0f);
    EXPECT_EQ(q.host_waits, 2);
    EXPECT_EQ(q.records, 2);
  });
}

}  // namespace
}  // namespace tera
