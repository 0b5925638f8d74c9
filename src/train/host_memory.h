// The host memory this process may still allocate: the node's MemAvailable
// and the memory limit of the cgroup it runs in, less that cgroup's usage.
// The limit is the one that applies to this process: its own cgroup's and
// every ancestor's (a Slurm job's, a container's), cgroup v2 (memory.max,
// memory.current) or v1 (memory.limit_in_bytes, memory.usage_in_bytes),
// found through /proc/self/cgroup. Every path is read under a root
// directory, so tests give a fake /proc and /sys/fs/cgroup.
#pragma once

#include <cstdint>
#include <string>

namespace tera {

struct HostMemory {
  int64_t mem_available = 0;  // /proc/meminfo MemAvailable, bytes (0: unknown)
  int64_t cgroup_limit = 0;   // the tightest cgroup limit (0: none)
  int64_t cgroup_usage = 0;   // that cgroup's usage
  std::string cgroup_file;    // the file that sets it (memory.max or memory.limit_in_bytes)

  // min(MemAvailable, limit - usage); 0: unknown.
  int64_t available() const;
  // Both figures, for messages: "MemAvailable 3.10 GiB; cgroup limit 512.00 MiB
  // (/sys/fs/cgroup/job/memory.max), 100.00 MiB of it in use".
  std::string describe() const;
};

// Reads the figures under `root` ("/" on a real machine).
HostMemory read_host_memory(const std::string& root = "/");

}  // namespace tera
