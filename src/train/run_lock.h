// A directory belongs to one run at a time: the run holds an exclusive
// flock(2) on "<dir>/.tera.lock" for its lifetime. The kernel releases it
// when the process ends, however it ends, so a crashed run never leaves a
// stale lock; the file records who holds it, for the refusal message.
#pragma once

#include <string>

#include "core/status.h"

namespace tera {

class RunLock {
 public:
  // Creates dir if needed. `what` names the setting ("ckpt.dir", "out.dir").
  static Expected<RunLock> acquire(const std::string& dir, const std::string& what);
  RunLock(RunLock&& o) noexcept : fd_(o.fd_), path_(std::move(o.path_)) { o.fd_ = -1; }
  RunLock& operator=(RunLock&&) = delete;
  RunLock(const RunLock&) = delete;
  ~RunLock();

 private:
  RunLock(int fd, std::string path) : fd_(fd), path_(std::move(path)) {}
  int fd_ = -1;
  std::string path_;
};

}  // namespace tera
