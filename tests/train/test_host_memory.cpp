// train/host_memory.h over fake roots: the limit that applies to the process
// is found in nested cgroup v2 directories (a Slurm job's) and in cgroup v1's
// memory hierarchy, the tightest (limit - usage) wins against MemAvailable,
// "max" and v1's "unlimited" are no limit, and the description names both
// figures and the file (issue 35 row 9).
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <string>

#include "train/host_memory.h"
#include "temp_dir_test.h"

namespace tera {
namespace {

namespace fs = std::filesystem;

constexpr int64_t kMiB = int64_t{1} << 20, kGiB = int64_t{1} << 30;

class HostMemoryRoot : public TempDirTest {
 protected:
  void SetUp() override {
    TempDirTest::SetUp();
    put("proc/meminfo", "MemTotal:       33554432 kB\nMemAvailable:   16777216 kB\n");  // 16 GiB available
  }
  void put(const std::string& rel, const std::string& text) {
    const fs::path p = dir_ / rel;
    fs::create_directories(p.parent_path());
    std::ofstream(p) << text;
  }
  HostMemory read() const { return read_host_memory(dir_.string()); }
};

TEST_F(HostMemoryRoot, NestedV2TakesTheTightestAncestor) {
  put("proc/self/cgroup", "0::/slurm/job1/step0\n");
  put("sys/fs/cgroup/memory.max", "max\n");
  put("sys/fs/cgroup/slurm/memory.max", std::to_string(8 * kGiB));
  put("sys/fs/cgroup/slurm/memory.current", std::to_string(1 * kGiB));
  put("sys/fs/cgroup/slurm/job1/memory.max", std::to_string(2 * kGiB));
  put("sys/fs/cgroup/slurm/job1/memory.current", std::to_string(1536 * kMiB));
  put("sys/fs/cgroup/slurm/job1/step0/memory.max", "max\n");
  const HostMemory m = read();
  EXPECT_EQ(m.mem_available, 16 * kGiB);
  EXPECT_EQ(m.cgroup_limit, 2 * kGiB);
  EXPECT_EQ(m.cgroup_usage, 1536 * kMiB);
  EXPECT_EQ(m.available(), 512 * kMiB);
  EXPECT_EQ(m.cgroup_file, (dir_ / "sys/fs/cgroup/slurm/job1/memory.max").string());
  const std::string d = m.describe();
  EXPECT_NE(d.find("MemAvailable 16.00 GiB"), std::string::npos) << d;
  EXPECT_NE(d.find("cgroup limit 2.00 GiB"), std::string::npos) << d;
  EXPECT_NE(d.find("slurm/job1/memory.max"), std::string::npos) << d;
}

TEST_F(HostMemoryRoot, V1MemoryHierarchy) {
  put("proc/self/cgroup", "5:cpu,cpuacct:/\n4:memory:/job7/task\n0::/\n");
  put("sys/fs/cgroup/memory/memory.limit_in_bytes", "9223372036854771712\n");  // unlimited
  put("sys/fs/cgroup/memory/job7/memory.limit_in_bytes", std::to_string(1 * kGiB));
  put("sys/fs/cgroup/memory/job7/memory.usage_in_bytes", std::to_string(256 * kMiB));
  put("sys/fs/cgroup/memory/job7/task/memory.limit_in_bytes", "9223372036854771712\n");
  const HostMemory m = read();
  EXPECT_EQ(m.cgroup_limit, 1 * kGiB);
  EXPECT_EQ(m.available(), 768 * kMiB);
  EXPECT_NE(m.cgroup_file.find("memory/job7/memory.limit_in_bytes"), std::string::npos) << m.cgroup_file;
}

TEST_F(HostMemoryRoot, MemAvailableWinsWhenSmallerAndAloneWithoutALimit) {
  put("proc/self/cgroup", "0::/user.slice\n");
  put("sys/fs/cgroup/user.slice/memory.max", std::to_string(64 * kGiB));
  EXPECT_EQ(read().available(), 16 * kGiB);
  fs::remove(dir_ / "sys/fs/cgroup/user.slice/memory.max");
  const HostMemory m = read();
  EXPECT_EQ(m.cgroup_limit, 0);
  EXPECT_EQ(m.available(), 16 * kGiB);
  EXPECT_EQ(m.describe(), "MemAvailable 16.00 GiB");
}

// A path from another cgroup namespace (not under the mount): the mount's
// own files, which in a container are the container's.
TEST_F(HostMemoryRoot, APathFromAnotherNamespaceFallsBackToTheMount) {
  put("proc/self/cgroup", "0::/../../elsewhere\n");
  put("sys/fs/cgroup/memory.max", std::to_string(3 * kGiB));
  put("sys/fs/cgroup/memory.current", std::to_string(1 * kGiB));
  EXPECT_EQ(read().available(), 2 * kGiB);
}

TEST_F(HostMemoryRoot, NothingReadableIsUnknown) {
  fs::remove(dir_ / "proc/meminfo");
  EXPECT_EQ(read().available(), 0);
}

}  // namespace
}  // namespace tera
