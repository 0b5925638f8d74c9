// Communicator over MPI (Open MPI from Debian) for host buffers. The only file
// with MPI calls. MPI is initialised with MPI_THREAD_FUNNELED: only the main
// thread calls MPI; OpenMP threads do compute only. Non-blocking collectives
// progress when the owner tests or waits on them (callers poll between layers).
#include <mpi.h>
#if __has_include(<mpi-ext.h>)
#include <mpi-ext.h>  // Open MPI's MPIX_Query_cuda_support, where built with CUDA
#endif
#include <malloc.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <climits>
#include <cstdlib>
#include <cstdio>
#include <cstring>
#include <memory>
#include <vector>
#include <fmt/format.h>

#include "comm/job_abort.h"
#include "comm/world.h"
#include "core/check.h"
#include "core/timer.h"

#define TERA_MPI_CHECK(expr)                                                                      \
  do {                                                                                            \
    const int _rc = (expr);                                                                       \
    if (_rc != MPI_SUCCESS) {                                                                     \
      char _msg[MPI_MAX_ERROR_STRING];                                                            \
      int _len = 0;                                                                               \
      MPI_Error_string(_rc, _msg, &_len);                                                         \
      ::tera::assert_fail(#expr, __FILE__, __LINE__, std::string("MPI error: ") + _msg);          \
    }                                                                                             \
  } while (0)

namespace tera {

namespace {

MPI_Datatype mpi_type(CommType t) {
  switch (t) {
    case CommType::f32: return MPI_FLOAT;
    case CommType::f64: return MPI_DOUBLE;
    case CommType::i32: return MPI_INT32_T;
    case CommType::i64: return MPI_INT64_T;
    case CommType::u8: return MPI_UINT8_T;
  }
  return MPI_BYTE;
}

MPI_Op mpi_op(ReduceOp op) { return op == ReduceOp::sum ? MPI_SUM : MPI_MAX; }

int as_int(int64_t n) {
  TERA_ASSERT(n >= 0 && n <= INT_MAX, "MPI message of " + std::to_string(n) + " elements exceeds INT_MAX");
  return static_cast<int>(n);
}

// The hang watchdog's setting, shared by the world and every communicator
// split from it.
struct WatchdogPolicy {
  double timeout_s = 600;
};

// Roll call: MPI cannot say which member of a group has not reached a
// collective, so a rank whose collective on a group of more than two times
// out asks every other member over the group's roll-call communicator. A
// rank answers while it waits (wait_all's poll loop answers the roll calls
// of every group it belongs to) with the operation it waits in; a member
// that does not answer within the grace is the one named: stopped, hung,
// dead, or busy outside any wait.
struct RollCall {
  MPI_Comm comm = MPI_COMM_NULL;
  int rank = 0;                 // this rank in the group
  std::vector<int> world_ranks;  // the members' world ranks
};
constexpr int kRollCallAsk = 1, kRollCallAnswer = 2;
constexpr int kRollCallAnswerBytes = 128;

// Every live communicator's roll call (main thread only: MPI_THREAD_FUNNELED),
// and the operation this rank waits in now ("" outside wait_all).
std::vector<const RollCall*>& roll_calls() {
  static std::vector<const RollCall*> all;
  return all;
}
std::string& waiting_in() {
  static std::string op;
  return op;
}

// Answers every roll call pending on any group of this rank.
void answer_roll_calls() {
  for (const RollCall* rc : roll_calls()) {
    for (;;) {
      int pending = 0;
      MPI_Status st;
      TERA_MPI_CHECK(MPI_Iprobe(MPI_ANY_SOURCE, kRollCallAsk, rc->comm, &pending, &st));
      if (pending == 0) break;
      char ask = 0;
      TERA_MPI_CHECK(MPI_Recv(&ask, 1, MPI_CHAR, st.MPI_SOURCE, kRollCallAsk, rc->comm, MPI_STATUS_IGNORE));
      char answer[kRollCallAnswerBytes] = {};
      std::snprintf(answer, sizeof(answer), "%s", waiting_in().empty() ? "?" : waiting_in().c_str());
      // Small enough to go eagerly: never waits for the asker.
      TERA_MPI_CHECK(MPI_Send(answer, kRollCallAnswerBytes, MPI_CHAR, st.MPI_SOURCE, kRollCallAnswer, rc->comm));
    }
  }
}

// Asks every other member of `rc` what it waits in, for up to `grace`
// seconds (answering others' roll calls meanwhile); returns who did not
// answer, as "world rank 4" / "world ranks 4, 6" with what the others said,
// or "" when every member answered.
std::string roll_call(const RollCall& rc, double grace) {
  const int n = static_cast<int>(rc.world_ranks.size());
  std::vector<MPI_Request> asks, answers;
  std::vector<int> member;
  std::vector<std::array<char, kRollCallAnswerBytes>> said(static_cast<size_t>(n));
  char ask = 0;
  for (int r = 0; r < n; ++r) {
    if (r == rc.rank) continue;
    asks.emplace_back();
    answers.emplace_back();
    member.push_back(r);
    TERA_MPI_CHECK(MPI_Isend(&ask, 1, MPI_CHAR, r, kRollCallAsk, rc.comm, &asks.back()));
    TERA_MPI_CHECK(MPI_Irecv(said[static_cast<size_t>(r)].data(), kRollCallAnswerBytes, MPI_CHAR, r, kRollCallAnswer,
                             rc.comm, &answers.back()));
  }
  const double t0 = now_seconds();
  std::vector<int> got(answers.size(), 0);
  for (;;) {
    answer_roll_calls();
    bool all = true;
    for (size_t i = 0; i < answers.size(); ++i) {
      if (got[i] == 0) TERA_MPI_CHECK(MPI_Test(&answers[i], &got[i], MPI_STATUS_IGNORE));
      all = all && got[i] != 0;
    }
    if (all || now_seconds() - t0 > grace) break;
    usleep(1000);
  }
  std::string silent, others;
  int n_silent = 0;
  for (size_t i = 0; i < answers.size(); ++i) {
    const int w = rc.world_ranks[static_cast<size_t>(member[i])];
    if (got[i] == 0) {
      silent += (silent.empty() ? "" : ", ") + std::to_string(w);
      ++n_silent;
    } else {
      said[static_cast<size_t>(member[i])].back() = '\0';
      others += fmt::format("{}world rank {} waits in {}", others.empty() ? "" : "; ", w,
                            said[static_cast<size_t>(member[i])].data());
    }
  }
  // The requests still pending go with the job (the caller ends it).
  if (n_silent == 0) return "";
  return fmt::format("world rank{} {}, which did not answer a roll call of the group within {:.1f} s{}",
                     n_silent > 1 ? "s" : "", silent, grace, others.empty() ? "" : " (" + others + ")");
}

// What a wait is for, so that a wait that times out can say what hung.
struct WaitContext {
  std::shared_ptr<const WatchdogPolicy> policy;
  std::string group;    // "dp (world ranks 1, 3)"
  int world_rank = 0;
  int peer = -1;        // world rank waited for (point-to-point, a pair's other rank); -1: any of the group
  std::shared_ptr<const RollCall> roll;  // the group's roll call, for peer = -1
};

[[noreturn]] void report_hang(const WaitContext& c, const std::string& op, double waited) {
  char host[256] = "?";
  gethostname(host, sizeof(host) - 1);
  std::string peer = c.peer >= 0 ? fmt::format("world rank {}", c.peer) : "";
  if (peer.empty() && c.roll != nullptr) peer = roll_call(*c.roll, std::clamp(c.policy->timeout_s / 2, 0.5, 5.0));
  if (peer.empty()) peer = "one of the other ranks of the group (every member answered a roll call: one is much slower)";
  std::fprintf(stderr,
               "tera: error: rank %d (host %s, pid %d): %s has waited %.0f s for %s, past train.comm_timeout_s = "
               "%g; group %s. That rank is stopped, hung or dead (or much slower); ending the job\n",
               c.world_rank, host, static_cast<int>(getpid()), op.c_str(), waited, peer.c_str(), c.policy->timeout_s,
               c.group.c_str());
  std::fflush(stderr);
  MPI_Abort(MPI_COMM_WORLD, 1);
  std::_Exit(1);
}

// MPI_Waitall with a deadline: spins on MPI_Testall (what MPI_Wait does
// inside Open MPI), yielding the core after half a second, so a long wait
// (a pipeline bubble, a slow rank) costs no latency and a hung one ends.
void wait_all(int n, MPI_Request* reqs, const WaitContext& c, const std::string& op) {
  int done = 0;
  TERA_MPI_CHECK(MPI_Testall(n, reqs, &done, MPI_STATUSES_IGNORE));
  if (done != 0) return;
  double t0 = now_seconds(), last = t0;
  waiting_in() = op;
  for (;;) {
    TERA_MPI_CHECK(MPI_Testall(n, reqs, &done, MPI_STATUSES_IGNORE));
    if (done != 0) {
      waiting_in().clear();
      return;
    }
    // Polls are 200 us apart: a longer gap is time this rank itself was stopped, not time waited for others.
    const double now = now_seconds();
    if (now - last > 1.0) t0 += now - last;
    last = now;
    const double waited = now - t0;
    if (waited > c.policy->timeout_s) report_hang(c, op, waited);
    if (waited > 0.5) {
      answer_roll_calls();
      usleep(200);
    }
  }
}

class MpiRequest final : public Request::Impl {
 public:
  explicit MpiRequest(WaitContext ctx) : ctx_(std::move(ctx)) {}
  MPI_Request req = MPI_REQUEST_NULL;
  bool test() override {
    int done = 0;
    TERA_MPI_CHECK(MPI_Test(&req, &done, MPI_STATUS_IGNORE));
    return done != 0;
  }
  void wait() override { wait_all(1, &req, ctx_, label); }

 private:
  WaitContext ctx_;
};

// Reduce-scatter as a ring of point-to-point messages (Patarasuk & Yuan
// 2009): p-1 steps; in step s rank r sends its running sum of block
// (r-s-1) mod p to rank r+1 and receives block (r-s-2) mod p from rank r-1,
// adding its own contribution with MPI_Reduce_local. After step p-2 it holds
// block r reduced over every rank. Each rank reduces 1/p of the buffer per
// step and sends (p-1)/p of it in all.
//
// Why not MPI_Ireduce_scatter_block: Open MPI 4.1's non-blocking version
// (coll/libnbc) reduces the whole buffer onto rank 0 and scatters it from
// there, p times the reduction work at one rank; with 2 ranks on this
// machine it took 4x as long as this ring for a 7 MB gradient unit.
// Steps advance whenever the owner tests or waits (like libnbc's schedules).
class RingReduceScatter final : public Request::Impl {
 public:
  RingReduceScatter(const void* send, void* recv, int count, MPI_Datatype type, MPI_Op op, MPI_Comm comm, int tag,
                    WaitContext ctx)
      : send_(static_cast<const uint8_t*>(send)), recv_(static_cast<uint8_t*>(recv)), count_(count), type_(type),
        op_(op), comm_(comm), tag_(tag), ctx_(std::move(ctx)) {
    TERA_MPI_CHECK(MPI_Comm_rank(comm_, &rank_));
    TERA_MPI_CHECK(MPI_Comm_size(comm_, &size_));
    int type_bytes = 0;
    TERA_MPI_CHECK(MPI_Type_size(type_, &type_bytes));
    block_bytes_ = static_cast<size_t>(count_) * static_cast<size_t>(type_bytes);
    // recv may be this rank's own block of send (in place): then the incoming
    // sum of the last step lands in scratch and is added into recv.
    aliased_ = recv_ == send_ + static_cast<size_t>(rank_) * block_bytes_;
    if (size_ == 1) {
      if (!aliased_) std::memcpy(recv_, send_, block_bytes_);
      done_ = true;
      return;
    }
    const int scratch = (size_ > 2 ? 2 : 0) + (aliased_ ? 1 : 0);
    if (scratch > 0) scratch_.reset(new uint8_t[static_cast<size_t>(scratch) * block_bytes_]);
    post(0);
  }
  bool test() override {
    while (!done_) {
      int complete = 0;
      TERA_MPI_CHECK(MPI_Testall(2, reqs_, &complete, MPI_STATUSES_IGNORE));
      if (complete == 0) return false;
      finish_step();
    }
    return true;
  }
  void wait() override {
    while (!done_) {
      wait_all(2, reqs_, ctx_, label + " (ring: receiving from the left neighbour)");
      finish_step();
    }
  }

 private:
  int block(int k) const { return ((k % size_) + size_) % size_; }
  const uint8_t* own(int b) const { return send_ + static_cast<size_t>(b) * block_bytes_; }
  uint8_t* acc(int s) { return scratch_.get() + static_cast<size_t>(s % 2) * block_bytes_; }
  bool last(int s) const { return s == size_ - 2; }
  uint8_t* incoming(int s) {
    if (!last(s)) return acc(s);
    return aliased_ ? scratch_.get() + (size_ > 2 ? 2 : 0) * block_bytes_ : recv_;
  }
  void post(int s) {
    const int right = (rank_ + 1) % size_, left = (rank_ + size_ - 1) % size_;
    const void* out = s == 0 ? own(block(rank_ - 1)) : acc(s - 1);
    TERA_MPI_CHECK(MPI_Irecv(incoming(s), count_, type_, left, tag_, comm_, &reqs_[0]));
    TERA_MPI_CHECK(MPI_Isend(out, count_, type_, right, tag_, comm_, &reqs_[1]));
  }
  void finish_step() {
    const int s = step_;
    // incoming(s) holds the sum over the ranks to the left; add ours.
    if (last(s) && aliased_) {
      TERA_MPI_CHECK(MPI_Reduce_local(incoming(s), recv_, count_, type_, op_));
    } else {
      TERA_MPI_CHECK(MPI_Reduce_local(own(block(rank_ - s - 2)), incoming(s), count_, type_, op_));
    }
    if (last(s)) {
      done_ = true;
      return;
    }
    post(++step_);
  }

  const uint8_t* send_;
  uint8_t* recv_;
  int count_;
  MPI_Datatype type_;
  MPI_Op op_;
  MPI_Comm comm_;
  int tag_;
  int rank_ = 0, size_ = 1;
  size_t block_bytes_ = 0;
  bool aliased_ = false, done_ = false;
  int step_ = 0;
  WaitContext ctx_;  // peer: the other rank of a pair; a larger ring asks the roll call
  std::unique_ptr<uint8_t[]> scratch_;  // two running sums (p > 2), the aliased last block
  MPI_Request reqs_[2] = {MPI_REQUEST_NULL, MPI_REQUEST_NULL};
};

class MpiComm final : public Communicator {
 public:
  MpiComm(MPI_Comm comm, std::string name, bool owned, std::shared_ptr<WatchdogPolicy> policy)
      : comm_(comm), name_(std::move(name)), owned_(owned), policy_(std::move(policy)) {
    TERA_MPI_CHECK(MPI_Comm_rank(comm_, &rank_));
    TERA_MPI_CHECK(MPI_Comm_size(comm_, &size_));
    // World ranks of this group's members, for the watchdog's messages.
    MPI_Group mine, world;
    TERA_MPI_CHECK(MPI_Comm_group(comm_, &mine));
    TERA_MPI_CHECK(MPI_Comm_group(MPI_COMM_WORLD, &world));
    std::vector<int> local(static_cast<size_t>(size_));
    for (int i = 0; i < size_; ++i) local[static_cast<size_t>(i)] = i;
    world_ranks_.resize(static_cast<size_t>(size_));
    TERA_MPI_CHECK(MPI_Group_translate_ranks(mine, size_, local.data(), world, world_ranks_.data()));
    MPI_Group_free(&mine);
    MPI_Group_free(&world);
    std::string members;
    for (int r : world_ranks_) members += (members.empty() ? "" : ", ") + std::to_string(r);
    group_ = fmt::format("{} (world ranks {})", name_, members);
    // Collectives built from point-to-point messages get their own context,
    // so their tags never meet the caller's send/recv; the roll call too.
    TERA_MPI_CHECK(MPI_Comm_dup(comm_, &coll_comm_));
    auto roll = std::make_shared<RollCall>();
    TERA_MPI_CHECK(MPI_Comm_dup(comm_, &roll->comm));
    roll->rank = rank_;
    roll->world_ranks = world_ranks_;
    roll_ = roll;
    roll_calls().push_back(roll_.get());
  }
  ~MpiComm() override {
    auto& all = roll_calls();
    all.erase(std::remove(all.begin(), all.end(), roll_.get()), all.end());
    MPI_Comm rc = roll_->comm;
    MPI_Comm_free(&rc);
    MPI_Comm_free(&coll_comm_);
    if (owned_) MPI_Comm_free(&comm_);
  }
  int rank() const override { return rank_; }
  int size() const override { return size_; }
  std::string name() const override { return name_; }
  int world_rank(int r) const override { return world_ranks_[static_cast<size_t>(r)]; }

  Request iall_reduce(void* buf, int64_t count, CommType t, ReduceOp op) override {
    auto r = std::make_shared<MpiRequest>(context(-1));
    TERA_MPI_CHECK(MPI_Iallreduce(MPI_IN_PLACE, buf, as_int(count), mpi_type(t), mpi_op(op), comm_, &r->req));
    r->label = label("all_reduce", count * comm_type_bytes(t));
    count_ring(2 * (size_ - 1) * count * comm_type_bytes(t) / size_);
    return Request(r);
  }
  Request ireduce_scatter(const void* send, void* recv, int64_t recv_count, CommType t, ReduceOp op) override {
    // A tag per operation: several may be in flight between the same ranks.
    const int tag = static_cast<int>(coll_seq_++ % 32768);
    auto r = std::make_shared<RingReduceScatter>(send, recv, as_int(recv_count), mpi_type(t), mpi_op(op), coll_comm_, tag,
                                                 context(size_ == 2 ? 1 - rank_ : -1));
    r->label = label("reduce_scatter", size_ * recv_count * comm_type_bytes(t));
    count_ring((size_ - 1) * recv_count * comm_type_bytes(t));
    return Request(r);
  }
  Request iall_gather(const void* send, void* recv, int64_t send_count, CommType t) override {
    auto r = std::make_shared<MpiRequest>(context(-1));
    const int64_t b = send_count * comm_type_bytes(t);
    const bool in_place = send == static_cast<const uint8_t*>(recv) + rank_ * b;
    TERA_MPI_CHECK(MPI_Iallgather(in_place ? MPI_IN_PLACE : send, as_int(send_count), mpi_type(t), recv,
                                  as_int(send_count), mpi_type(t), comm_, &r->req));
    r->label = label("all_gather", size_ * b);
    count_ring((size_ - 1) * b);
    return Request(r);
  }
  Request ibroadcast(void* buf, int64_t count, CommType t, int root) override {
    auto r = std::make_shared<MpiRequest>(context(rank_ == root ? -1 : root));
    TERA_MPI_CHECK(MPI_Ibcast(buf, as_int(count), mpi_type(t), root, comm_, &r->req));
    r->label = label("broadcast", count * comm_type_bytes(t));
    count_ring(rank_ == root ? count * comm_type_bytes(t) : 0);
    return Request(r);
  }
  Request isend(const void* buf, int64_t bytes, int dst, int tag) override {
    auto r = std::make_shared<MpiRequest>(context(dst));
    TERA_MPI_CHECK(MPI_Isend(buf, as_int(bytes), MPI_BYTE, dst, tag, comm_, &r->req));
    r->label = label("send", bytes);
    count_ring(bytes);
    return Request(r);
  }
  Request irecv(void* buf, int64_t bytes, int src, int tag) override {
    auto r = std::make_shared<MpiRequest>(context(src));
    TERA_MPI_CHECK(MPI_Irecv(buf, as_int(bytes), MPI_BYTE, src, tag, comm_, &r->req));
    r->label = label("recv", bytes);
    return Request(r);
  }
  void barrier() override {
    MPI_Request req;
    TERA_MPI_CHECK(MPI_Ibarrier(comm_, &req));
    wait_all(1, &req, context(-1), "barrier " + name_);
  }
  std::unique_ptr<Communicator> split(int color, int key, const std::string& name) override {
    MPI_Comm out;
    TERA_MPI_CHECK(MPI_Comm_split(comm_, color, key, &out));
    return std::make_unique<MpiComm>(out, name, true, policy_);
  }

 private:
  void count_ring(int64_t b) { count(b); }
  // peer: a rank of this communicator, or -1 for "any of the group".
  WaitContext context(int peer) const {
    if (peer < 0 && size_ == 2) peer = 1 - rank_;  // a pair's collective waits for the other one
    return WaitContext{policy_, group_, world_ranks_[static_cast<size_t>(rank_)],
                       peer >= 0 ? world_ranks_[static_cast<size_t>(peer)] : -1, roll_};
  }
  MPI_Comm comm_;
  MPI_Comm coll_comm_ = MPI_COMM_NULL;
  int64_t coll_seq_ = 0;
  std::string name_;
  bool owned_;
  std::shared_ptr<WatchdogPolicy> policy_;
  std::vector<int> world_ranks_;
  std::string group_;
  int rank_ = 0, size_ = 1;
  std::shared_ptr<RollCall> roll_;  // registered in roll_calls() while this communicator lives
};

class MpiWorld final : public CommWorld {
 public:
  MpiWorld() {
    // Open MPI 4.1's non-blocking all-reduce (coll/libnbc) picks a binomial
    // tree (reduce the whole buffer to rank 0, then broadcast) whenever the
    // buffer is in place or there are fewer than 4 ranks, which is every
    // ZeRO-0 gradient bucket. Reduce-scatter + all-gather (Rabenseifner)
    // moves 2(p-1)/p of the buffer and spreads the reduction; libnbc falls
    // back to a ring where it does not apply. 2 ranks, 7 MB: 2 ms instead of
    // 8. An explicit setting in the environment or on the mpirun line wins.
    setenv("OMPI_MCA_coll_libnbc_iallreduce_algorithm", "3", 0);
    // Open MPI allocates a scratch buffer the size of the message for every
    // non-blocking reduction and frees it at the end. With several in flight,
    // glibc serves each from fresh mmap()ed pages and unmaps it afterwards,
    // so every operation pays a page fault per 4 KiB (the receiver's copy and
    // the reduction both touch it first): 2 ranks, ZeRO-0, 43 MB of gradients
    // took 65 ms a step that way instead of about 10. Keep blocks up to 32 MiB
    // (glibc's largest threshold) on the heap, and keep freed heap memory.
    mallopt(M_MMAP_THRESHOLD, 32 << 20);
    mallopt(M_TRIM_THRESHOLD, 1 << 30);
    int provided = 0;
    TERA_MPI_CHECK(MPI_Init_thread(nullptr, nullptr, MPI_THREAD_FUNNELED, &provided));
    set_job_abort([](int code) { MPI_Abort(MPI_COMM_WORLD, code); });
    TERA_ASSERT(provided >= MPI_THREAD_FUNNELED, "MPI does not provide MPI_THREAD_FUNNELED");
    world_ = std::make_unique<MpiComm>(MPI_COMM_WORLD, "world", false, policy_);
    MPI_Comm node;
    TERA_MPI_CHECK(MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, 0, MPI_INFO_NULL, &node));
    TERA_MPI_CHECK(MPI_Comm_size(node, &local_size_));
    TERA_MPI_CHECK(MPI_Comm_rank(node, &local_rank_));
    MPI_Comm_free(&node);
    char name[MPI_MAX_PROCESSOR_NAME];
    int len = 0;
    MPI_Get_processor_name(name, &len);
    host_.assign(name, static_cast<size_t>(len));
  }
  ~MpiWorld() override {
    world_.reset();
    MPI_Finalize();
  }
  Communicator& world() override { return *world_; }
  int local_size() const override { return local_size_; }
  int local_rank() const override { return local_rank_; }
  bool is_mpi() const override { return true; }
  std::string host() const override { return host_; }
  [[noreturn]] void abort(int code) override {
    MPI_Abort(MPI_COMM_WORLD, code);
    std::_Exit(code);
  }
  void set_comm_timeout(double seconds) override { policy_->timeout_s = seconds; }

 private:
  std::shared_ptr<WatchdogPolicy> policy_ = std::make_shared<WatchdogPolicy>();
  std::unique_ptr<Communicator> world_;
  int local_size_ = 1;
  int local_rank_ = 0;
  std::string host_;
};

}  // namespace

std::unique_ptr<CommWorld> make_mpi_world() { return std::make_unique<MpiWorld>(); }

bool mpi_library_takes_device_pointers(const std::string& vendor) {
  if (vendor == "cuda") {
#if defined(MPIX_CUDA_AWARE_SUPPORT) && MPIX_CUDA_AWARE_SUPPORT
    if (MPIX_Query_cuda_support() == 1) return true;
#endif
  }
  if (vendor == "hip") {
#if defined(MPIX_ROCM_AWARE_SUPPORT) && MPIX_ROCM_AWARE_SUPPORT
    if (MPIX_Query_rocm_support() == 1) return true;
#endif
  }
  // Cray MPICH (Frontier): GPU support is switched on for the job.
  const char* cray = std::getenv("MPICH_GPU_SUPPORT_ENABLED");
  return !vendor.empty() && cray != nullptr && std::string(cray) == "1";
}

}  // namespace tera
