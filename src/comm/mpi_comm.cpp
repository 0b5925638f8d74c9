// Communicator over MPI (Open MPI from Debian) for host buffers. The only file
// with MPI calls. MPI is initialised with MPI_THREAD_FUNNELED: only the main
// thread calls MPI; OpenMP threads do compute only. Non-blocking collectives
// progress when the owner tests or waits on them (callers poll between layers).
#include <mpi.h>
#include <unistd.h>

#include <climits>
#include <cstdlib>
#include <fmt/format.h>

#include "comm/fake_comm.h"
#include "comm/world.h"
#include "core/check.h"

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

class MpiRequest final : public Request::Impl {
 public:
  MPI_Request req = MPI_REQUEST_NULL;
  bool test() override {
    int done = 0;
    TERA_MPI_CHECK(MPI_Test(&req, &done, MPI_STATUS_IGNORE));
    return done != 0;
  }
  void wait() override { TERA_MPI_CHECK(MPI_Wait(&req, MPI_STATUS_IGNORE)); }
};

class MpiComm final : public Communicator {
 public:
  MpiComm(MPI_Comm comm, std::string name, bool owned) : comm_(comm), name_(std::move(name)), owned_(owned) {
    TERA_MPI_CHECK(MPI_Comm_rank(comm_, &rank_));
    TERA_MPI_CHECK(MPI_Comm_size(comm_, &size_));
  }
  ~MpiComm() override {
    if (owned_) MPI_Comm_free(&comm_);
  }
  int rank() const override { return rank_; }
  int size() const override { return size_; }
  std::string name() const override { return name_; }

  Request iall_reduce(void* buf, int64_t count, CommType t, ReduceOp op) override {
    auto r = std::make_shared<MpiRequest>();
    TERA_MPI_CHECK(MPI_Iallreduce(MPI_IN_PLACE, buf, as_int(count), mpi_type(t), mpi_op(op), comm_, &r->req));
    r->label = label("all_reduce", count * comm_type_bytes(t));
    count_ring(2 * (size_ - 1) * count * comm_type_bytes(t) / size_);
    return Request(r);
  }
  Request ireduce_scatter(const void* send, void* recv, int64_t recv_count, CommType t, ReduceOp op) override {
    auto r = std::make_shared<MpiRequest>();
    TERA_MPI_CHECK(
        MPI_Ireduce_scatter_block(send, recv, as_int(recv_count), mpi_type(t), mpi_op(op), comm_, &r->req));
    r->label = label("reduce_scatter", size_ * recv_count * comm_type_bytes(t));
    count_ring((size_ - 1) * recv_count * comm_type_bytes(t));
    return Request(r);
  }
  Request iall_gather(const void* send, void* recv, int64_t send_count, CommType t) override {
    auto r = std::make_shared<MpiRequest>();
    const int64_t b = send_count * comm_type_bytes(t);
    const bool in_place = send == static_cast<const uint8_t*>(recv) + rank_ * b;
    TERA_MPI_CHECK(MPI_Iallgather(in_place ? MPI_IN_PLACE : send, as_int(send_count), mpi_type(t), recv,
                                  as_int(send_count), mpi_type(t), comm_, &r->req));
    r->label = label("all_gather", size_ * b);
    count_ring((size_ - 1) * b);
    return Request(r);
  }
  Request ibroadcast(void* buf, int64_t count, CommType t, int root) override {
    auto r = std::make_shared<MpiRequest>();
    TERA_MPI_CHECK(MPI_Ibcast(buf, as_int(count), mpi_type(t), root, comm_, &r->req));
    r->label = label("broadcast", count * comm_type_bytes(t));
    count_ring(rank_ == root ? count * comm_type_bytes(t) : 0);
    return Request(r);
  }
  Request isend(const void* buf, int64_t bytes, int dst, int tag) override {
    auto r = std::make_shared<MpiRequest>();
    TERA_MPI_CHECK(MPI_Isend(buf, as_int(bytes), MPI_BYTE, dst, tag, comm_, &r->req));
    r->label = label("send", bytes);
    count_ring(bytes);
    return Request(r);
  }
  Request irecv(void* buf, int64_t bytes, int src, int tag) override {
    auto r = std::make_shared<MpiRequest>();
    TERA_MPI_CHECK(MPI_Irecv(buf, as_int(bytes), MPI_BYTE, src, tag, comm_, &r->req));
    r->label = label("recv", bytes);
    return Request(r);
  }
  void barrier() override { TERA_MPI_CHECK(MPI_Barrier(comm_)); }
  std::unique_ptr<Communicator> split(int color, int key, const std::string& name) override {
    MPI_Comm out;
    TERA_MPI_CHECK(MPI_Comm_split(comm_, color, key, &out));
    return std::make_unique<MpiComm>(out, name, true);
  }

 private:
  void count_ring(int64_t b) { count(b); }
  MPI_Comm comm_;
  std::string name_;
  bool owned_;
  int rank_ = 0, size_ = 1;
};

class MpiWorld final : public CommWorld {
 public:
  MpiWorld() {
    int provided = 0;
    TERA_MPI_CHECK(MPI_Init_thread(nullptr, nullptr, MPI_THREAD_FUNNELED, &provided));
    TERA_ASSERT(provided >= MPI_THREAD_FUNNELED, "MPI does not provide MPI_THREAD_FUNNELED");
    world_ = std::make_unique<MpiComm>(MPI_COMM_WORLD, "world", false);
    MPI_Comm node;
    TERA_MPI_CHECK(MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, 0, MPI_INFO_NULL, &node));
    TERA_MPI_CHECK(MPI_Comm_size(node, &local_size_));
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
  bool is_mpi() const override { return true; }
  std::string host() const override { return host_; }
  [[noreturn]] void abort(int code) override {
    MPI_Abort(MPI_COMM_WORLD, code);
    std::_Exit(code);
  }

 private:
  std::unique_ptr<Communicator> world_;
  int local_size_ = 1;
  std::string host_;
};

class SingleWorld final : public CommWorld {
 public:
  SingleWorld() : fake_(1), world_(fake_.communicator(0)) {
    char h[256] = "localhost";
    gethostname(h, sizeof(h) - 1);
    host_ = h;
  }
  Communicator& world() override { return *world_; }
  int local_size() const override { return 1; }
  bool is_mpi() const override { return false; }
  std::string host() const override { return host_; }
  [[noreturn]] void abort(int code) override { std::_Exit(code); }

 private:
  FakeWorld fake_;
  std::unique_ptr<Communicator> world_;
  std::string host_;
};

}  // namespace

bool launched_by_mpi() {
  for (const char* v : {"OMPI_COMM_WORLD_SIZE", "PMIX_RANK", "PMI_RANK", "PMI_SIZE", "MPI_LOCALNRANKS"}) {
    if (std::getenv(v) != nullptr) return true;
  }
  const char* ntasks = std::getenv("SLURM_NTASKS");
  return std::getenv("SLURM_PROCID") != nullptr && ntasks != nullptr && std::atoi(ntasks) > 1;
}

std::unique_ptr<CommWorld> CommWorld::init() {
  if (launched_by_mpi()) return std::make_unique<MpiWorld>();
  return std::make_unique<SingleWorld>();
}

}  // namespace tera
