// InProcessWorld: threads as ranks. Every collective is two barriers around a
// rank-ordered computation over staged copies, so in-place calls are safe.
#include "comm/in_process_comm.h"

#include <algorithm>
#include <barrier>
#include <condition_variable>
#include <cstring>
#include <deque>
#include <map>
#include <mutex>
#include <thread>
#include <tuple>
#include <vector>

#include "core/check.h"

namespace tera {

struct InProcessWorld::Group {
  explicit Group(int n) : size(n), bar(n), slots(static_cast<size_t>(n)), split_args(static_cast<size_t>(n)) {}
  int size;
  std::barrier<> bar;
  std::vector<std::vector<uint8_t>> slots;
  // point-to-point
  std::mutex mu;
  std::condition_variable cv;
  std::map<std::tuple<int, int, int>, std::deque<std::vector<uint8_t>>> mail;
  // split
  std::vector<std::pair<int, int>> split_args;
  std::map<int, std::shared_ptr<Group>> split_groups;
  std::map<int, std::vector<int>> split_members;  // color -> parent ranks in new-rank order
};

namespace {

template <typename T>
void reduce_into(T* out, const std::vector<std::vector<uint8_t>>& slots, int64_t offset, int64_t n, ReduceOp op) {
  for (int64_t i = 0; i < n; ++i) {
    T acc = reinterpret_cast<const T*>(slots[0].data())[offset + i];
    for (size_t r = 1; r < slots.size(); ++r) {
      const T v = reinterpret_cast<const T*>(slots[r].data())[offset + i];
      acc = op == ReduceOp::sum ? acc + v : std::max(acc, v);
    }
    out[i] = acc;
  }
}

void reduce_typed(void* out, const std::vector<std::vector<uint8_t>>& slots, int64_t offset, int64_t n, CommType t,
                  ReduceOp op) {
  switch (t) {
    case CommType::f32: reduce_into(static_cast<float*>(out), slots, offset, n, op); break;
    case CommType::f64: reduce_into(static_cast<double*>(out), slots, offset, n, op); break;
    case CommType::i32: reduce_into(static_cast<int32_t*>(out), slots, offset, n, op); break;
    case CommType::i64: reduce_into(static_cast<int64_t*>(out), slots, offset, n, op); break;
    case CommType::u8: reduce_into(static_cast<uint8_t*>(out), slots, offset, n, op); break;
  }
}

class InProcessRecv final : public Request::Impl {
 public:
  InProcessRecv(std::shared_ptr<InProcessWorld::Group> g, std::tuple<int, int, int> key, void* buf, int64_t bytes)
      : g_(std::move(g)), key_(key), buf_(buf), bytes_(bytes) {}
  bool test() override {
    std::lock_guard<std::mutex> lk(g_->mu);
    return take_locked();
  }
  void wait() override {
    std::unique_lock<std::mutex> lk(g_->mu);
    g_->cv.wait(lk, [&] { return done_ || take_locked(); });
  }

 private:
  bool take_locked() {
    if (done_) return true;
    auto it = g_->mail.find(key_);
    if (it == g_->mail.end() || it->second.empty()) return false;
    TERA_ASSERT(static_cast<int64_t>(it->second.front().size()) == bytes_, "in-process recv: message size mismatch");
    std::memcpy(buf_, it->second.front().data(), static_cast<size_t>(bytes_));
    it->second.pop_front();
    done_ = true;
    return true;
  }
  std::shared_ptr<InProcessWorld::Group> g_;
  std::tuple<int, int, int> key_;
  void* buf_;
  int64_t bytes_;
  bool done_ = false;
};

}  // namespace

class InProcessComm final : public Communicator {
 public:
  InProcessComm(std::shared_ptr<InProcessWorld::Group> g, int rank, std::string name)
      : g_(std::move(g)), rank_(rank), name_(std::move(name)) {}
  int rank() const override { return rank_; }
  int size() const override { return g_->size; }
  std::string name() const override { return name_; }

  Request iall_reduce(void* buf, int64_t count, CommType t, ReduceOp op) override {
    const int64_t S = count * comm_type_bytes(t);
    collective(buf, S, [&] { reduce_typed(buf, g_->slots, 0, count, t, op); });
    count_bytes(2 * (size() - 1) * S / size());
    return {};
  }
  Request ireduce_scatter(const void* send, void* recv, int64_t recv_count, CommType t, ReduceOp op) override {
    const int64_t S = recv_count * size() * comm_type_bytes(t);
    collective(send, S, [&] { reduce_typed(recv, g_->slots, rank_ * recv_count, recv_count, t, op); });
    count_bytes((size() - 1) * S / size());
    return {};
  }
  Request iall_gather(const void* send, void* recv, int64_t send_count, CommType t) override {
    const int64_t b = send_count * comm_type_bytes(t);
    collective(send, b, [&] {
      for (int r = 0; r < size(); ++r) std::memcpy(static_cast<uint8_t*>(recv) + r * b, g_->slots[static_cast<size_t>(r)].data(), static_cast<size_t>(b));
    });
    count_bytes((size() - 1) * b);
    return {};
  }
  Request ibroadcast(void* buf, int64_t count, CommType t, int root) override {
    const int64_t b = count * comm_type_bytes(t);
    collective(buf, b, [&] { std::memcpy(buf, g_->slots[static_cast<size_t>(root)].data(), static_cast<size_t>(b)); });
    count_bytes(rank_ == root ? b : 0);
    return {};
  }
  Request isend(const void* buf, int64_t bytes, int dst, int tag) override {
    TERA_ASSERT(dst >= 0 && dst < size() && dst != rank_, "in-process isend: bad destination");
    {
      std::lock_guard<std::mutex> lk(g_->mu);
      const auto* p = static_cast<const uint8_t*>(buf);
      g_->mail[{rank_, dst, tag}].emplace_back(p, p + bytes);
    }
    g_->cv.notify_all();
    count_bytes(bytes);
    return {};
  }
  Request irecv(void* buf, int64_t bytes, int src, int tag) override {
    TERA_ASSERT(src >= 0 && src < size() && src != rank_, "in-process irecv: bad source");
    return Request(std::make_shared<InProcessRecv>(g_, std::tuple<int, int, int>{src, rank_, tag}, buf, bytes));
  }
  void barrier() override { g_->bar.arrive_and_wait(); }

  std::unique_ptr<Communicator> split(int color, int key, const std::string& name) override {
    g_->split_args[static_cast<size_t>(rank_)] = {color, key};
    g_->bar.arrive_and_wait();
    if (rank_ == 0) {
      std::map<int, std::vector<std::pair<int, int>>> by_color;  // color -> (key, parent rank)
      for (int r = 0; r < size(); ++r) {
        const auto [c, k] = g_->split_args[static_cast<size_t>(r)];
        by_color[c].push_back({k, r});
      }
      g_->split_groups.clear();
      g_->split_members.clear();
      for (auto& [c, v] : by_color) {
        std::sort(v.begin(), v.end());
        g_->split_groups[c] = std::make_shared<InProcessWorld::Group>(static_cast<int>(v.size()));
        for (auto& kr : v) g_->split_members[c].push_back(kr.second);
      }
    }
    g_->bar.arrive_and_wait();
    const auto& members = g_->split_members[color];
    const int new_rank = static_cast<int>(std::find(members.begin(), members.end(), rank_) - members.begin());
    auto out = std::make_unique<InProcessComm>(g_->split_groups[color], new_rank, name);
    g_->bar.arrive_and_wait();
    return out;
  }

 private:
  template <typename F>
  void collective(const void* data, int64_t bytes, F&& compute) {
    const auto* p = static_cast<const uint8_t*>(data);
    g_->slots[static_cast<size_t>(rank_)].assign(p, p + bytes);
    g_->bar.arrive_and_wait();
    compute();
    g_->bar.arrive_and_wait();
  }
  void count_bytes(int64_t b) { count(b); }

  std::shared_ptr<InProcessWorld::Group> g_;
  int rank_;
  std::string name_;
};

InProcessWorld::InProcessWorld(int size) : group_(std::make_shared<Group>(size)) { TERA_ASSERT(size >= 1); }
InProcessWorld::~InProcessWorld() = default;
int InProcessWorld::size() const { return group_->size; }

std::unique_ptr<Communicator> InProcessWorld::communicator(int rank) {
  TERA_ASSERT(rank >= 0 && rank < group_->size);
  return std::make_unique<InProcessComm>(group_, rank, "world");
}

void InProcessWorld::run(int size, const std::function<void(Communicator&)>& f) {
  InProcessWorld world(size);
  std::vector<std::thread> threads;
  for (int r = 0; r < size; ++r) {
    threads.emplace_back([&world, &f, r] {
      auto comm = world.communicator(r);
      f(*comm);
    });
  }
  for (auto& t : threads) t.join();
}

}  // namespace tera
