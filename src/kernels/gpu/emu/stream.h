// An emulated device stream (gpu-emu): work is queued in issue order and
// runs on a worker thread of the stream's own, after the call that queued
// it has returned, as a GPU runs a CUDA stream. Two streams are ordered
// only by what one waits for on the other (events, emu_backend's
// DeviceQueue), so host code that forgets a synchronisation reads or
// overwrites memory the stream has not got to yet.
//
// Lazy mode (the default) makes that visible every time: the worker runs
// queued work only as far as someone has asked for (a host wait, a query of
// an event, another stream's wait), so nothing ever runs early by luck.
// Eager mode runs whatever is queued as soon as it can, like a GPU; its
// interleavings vary from run to run.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <mutex>
#include <string>
#include <thread>

namespace tera::gpu::emu {

class Stream {
 public:
  enum class Mode { lazy, eager };
  // warp: the warp width its kernels run at (32 or 64).
  Stream(std::string name, int warp, Mode mode);
  ~Stream();  // runs what is queued, then stops the worker
  Stream(const Stream&) = delete;
  Stream& operator=(const Stream&) = delete;

  // Queues work; returns its sequence number (1, 2, ... in issue order).
  uint64_t enqueue(std::function<void()> work);
  uint64_t issued() const;     // the sequence number of the last work queued (0: none)
  uint64_t completed() const;  // the last work run (asks for nothing)
  // True once work `seq` has run; asks the worker to get there, never blocks.
  bool done(uint64_t seq);
  void wait(uint64_t seq);  // blocks until work `seq` has run
  void synchronize() { wait(issued()); }

  int warp() const { return warp_; }
  Mode mode() const { return mode_; }
  const std::string& name() const { return name_; }
  // Launches of the kernel of that name (TERA_LAUNCH's spelling) queued here.
  int64_t launches(const std::string& kernel) const;
  void count_launch(const char* kernel);

 private:
  void run();  // the worker
  void demand(uint64_t seq);  // holds mu_

  const std::string name_;
  const int warp_;
  const Mode mode_;
  mutable std::mutex mu_;
  std::condition_variable work_cv_;  // the worker waits here
  std::condition_variable done_cv_;  // waiters for completions
  std::deque<std::pair<uint64_t, std::function<void()>>> queue_;
  uint64_t issued_ = 0, completed_ = 0, wanted_ = 0;
  bool stopping_ = false;
  std::map<std::string, int64_t> launches_;
  std::thread worker_;
};

}  // namespace tera::gpu::emu
