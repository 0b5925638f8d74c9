// Communicator over MPI (Open MPI from Debian) for host buffers: the collective
// and point-to-point calls, with reduce-scatter as a ring of messages. With
// mpi_watchdog.cpp (waits with a deadline) and mpi_world.cpp (MPI_Init, the
// settings made before it, abort), the only files with MPI calls. MPI is
// initialised with MPI_THREAD_FUNNELED: only the main thread calls MPI; OpenMP
// threads do compute only. Non-blocking collectives progress when the owner
// tests or waits on them (callers poll between layers).
#include <algorithm>
#include <climits>
#include <cstring>
#include <memory>
#include <string>
#include <vector>
#include <fmt/format.h>

#include "comm/mpi_internal.h"
#include "core/check.h"

namespace tera {

namespace mpi {

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

}  // namespace

std::unique_ptr<Communicator> make_mpi_comm(MPI_Comm comm, std::string name, bool owned,
                                            std::shared_ptr<WatchdogPolicy> policy) {
  return std::make_unique<MpiComm>(comm, std::move(name), owned, std::move(policy));
}

}  // namespace mpi

}  // namespace tera
