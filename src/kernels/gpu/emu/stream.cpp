// The emulated stream (stream.h): one worker thread per stream, running the
// queue in order as far as demanded (lazy) or as far as queued (eager).
#include "kernels/gpu/emu/stream.h"

#include "kernels/gpu/emu/emulator.h"

namespace tera::gpu::emu {

Stream::Stream(std::string name, int warp, Mode mode) : name_(std::move(name)), warp_(warp), mode_(mode) {
  worker_ = std::thread([this] { run(); });
}

Stream::~Stream() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    wanted_ = issued_;  // finish the queue
    stopping_ = true;
  }
  work_cv_.notify_all();
  worker_.join();
}

uint64_t Stream::enqueue(std::function<void()> work) {
  std::lock_guard<std::mutex> lock(mu_);
  const uint64_t seq = ++issued_;
  queue_.emplace_back(seq, std::move(work));
  if (mode_ == Mode::eager) {
    wanted_ = issued_;
    work_cv_.notify_all();
  }
  return seq;
}

uint64_t Stream::issued() const {
  std::lock_guard<std::mutex> lock(mu_);
  return issued_;
}

uint64_t Stream::completed() const {
  std::lock_guard<std::mutex> lock(mu_);
  return completed_;
}

void Stream::demand(uint64_t seq) {
  if (seq > wanted_) {
    wanted_ = seq;
    work_cv_.notify_all();
  }
}

bool Stream::done(uint64_t seq) {
  std::lock_guard<std::mutex> lock(mu_);
  demand(seq);
  return completed_ >= seq;
}

void Stream::wait(uint64_t seq) {
  std::unique_lock<std::mutex> lock(mu_);
  demand(seq);
  done_cv_.wait(lock, [&] { return completed_ >= seq; });
}

int64_t Stream::launches(const std::string& kernel) const {
  std::lock_guard<std::mutex> lock(mu_);
  const auto it = launches_.find(kernel);
  return it == launches_.end() ? 0 : it->second;
}

void Stream::count_launch(const char* kernel) {
  std::lock_guard<std::mutex> lock(mu_);
  ++launches_[kernel];
}

void Stream::run() {
  set_thread_warp_size(warp_);  // kernels on this worker see the stream's warp width
  std::unique_lock<std::mutex> lock(mu_);
  for (;;) {
    work_cv_.wait(lock, [&] { return (!queue_.empty() && queue_.front().first <= wanted_) || (stopping_ && queue_.empty()); });
    if (queue_.empty()) return;  // stopping, nothing left
    auto [seq, work] = std::move(queue_.front());
    queue_.pop_front();
    lock.unlock();
    work();
    lock.lock();
    completed_ = seq;
    done_cv_.notify_all();
  }
}

}  // namespace tera::gpu::emu
