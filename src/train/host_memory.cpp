// The host memory this process may allocate; see host_memory.h.
#include "train/host_memory.h"

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <sstream>

#include <fmt/format.h>

#include "core/format.h"

namespace tera {

namespace fs = std::filesystem;

namespace {

// A limit at or above this is "unlimited" (cgroup v1 writes 2^63 rounded down to a page).
constexpr int64_t kNoLimit = int64_t{1} << 60;

// A byte count from a one-value cgroup file; 0 for "max", missing or unreadable.
int64_t read_bytes(const fs::path& p) {
  std::ifstream f(p);
  std::string s;
  if (!(f >> s) || s == "max") return 0;
  try {
    const long long v = std::stoll(s);
    return v > 0 && v < kNoLimit ? v : 0;
  } catch (...) {
    return 0;
  }
}

int64_t mem_available(const fs::path& root) {
  std::ifstream f(root / "proc/meminfo");
  std::string line;
  while (std::getline(f, line)) {
    if (line.rfind("MemAvailable:", 0) != 0) continue;
    std::istringstream in(line.substr(13));
    int64_t kib = 0;
    return in >> kib ? kib * 1024 : 0;
  }
  return 0;
}

// The tightest (limit - usage) from `dir` up to the hierarchy's mount point `top`.
void tightest_in(const fs::path& top, const fs::path& dir, const char* limit_name, const char* usage_name,
                 HostMemory* m) {
  for (fs::path d = dir;; d = d.parent_path()) {
    const int64_t limit = read_bytes(d / limit_name);
    if (limit > 0) {
      const int64_t usage = read_bytes(d / usage_name);
      const int64_t left = std::max<int64_t>(0, limit - usage);
      if (m->cgroup_limit == 0 || left < m->cgroup_limit - m->cgroup_usage) {
        m->cgroup_limit = limit;
        m->cgroup_usage = usage;
        m->cgroup_file = (d / limit_name).string();
      }
    }
    if (d == top || !d.has_relative_path() || d.string().size() <= top.string().size()) break;
  }
}

// This process's cgroup directory under `top` for a /proc/self/cgroup path,
// or `top` itself when the path is not there (another cgroup namespace).
fs::path cgroup_dir(const fs::path& top, const std::string& path) {
  const fs::path d = (top / fs::path(path).relative_path()).lexically_normal();
  const fs::path rel = d.lexically_relative(top);
  if (rel.empty() || *rel.begin() == "..") return top;  // never a directory outside the hierarchy
  std::error_code ec;
  return fs::is_directory(d, ec) ? d : top;
}

}  // namespace

int64_t HostMemory::available() const {
  const int64_t left = cgroup_limit > 0 ? std::max<int64_t>(0, cgroup_limit - cgroup_usage) : 0;
  if (mem_available > 0 && left > 0) return std::min(mem_available, left);
  if (cgroup_limit > 0) return left;
  return mem_available;
}

std::string HostMemory::describe() const {
  std::string s = mem_available > 0 ? "MemAvailable " + human_bytes(mem_available) : "MemAvailable unknown";
  if (cgroup_limit > 0) {
    s += fmt::format("; cgroup limit {} ({}), {} of it in use", human_bytes(cgroup_limit), cgroup_file,
                     human_bytes(cgroup_usage));
  }
  return s;
}

HostMemory read_host_memory(const std::string& root) {
  const fs::path r(root);
  HostMemory m;
  m.mem_available = mem_available(r);
  std::ifstream f(r / "proc/self/cgroup");
  std::string line;
  bool v2_seen = false;
  while (std::getline(f, line)) {
    // hierarchy-ID:controllers:path; v2 is "0::/path", v1 names "memory" among its controllers.
    const size_t a = line.find(':'), b = a == std::string::npos ? a : line.find(':', a + 1);
    if (b == std::string::npos) continue;
    const std::string controllers = line.substr(a + 1, b - a - 1), path = line.substr(b + 1);
    if (line.compare(0, a, "0") == 0 && controllers.empty()) {
      const fs::path top = r / "sys/fs/cgroup";
      tightest_in(top, cgroup_dir(top, path), "memory.max", "memory.current", &m);
      v2_seen = true;
    } else if (("," + controllers + ",").find(",memory,") != std::string::npos) {
      const fs::path top = r / "sys/fs/cgroup/memory";
      tightest_in(top, cgroup_dir(top, path), "memory.limit_in_bytes", "memory.usage_in_bytes", &m);
    }
  }
  if (!v2_seen && m.cgroup_limit == 0) {
    // No /proc/self/cgroup entry (a minimal container): the v2 root's file, as before.
    const fs::path top = r / "sys/fs/cgroup";
    tightest_in(top, top, "memory.max", "memory.current", &m);
  }
  return m;
}

}  // namespace tera
