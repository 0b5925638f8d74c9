// Device communicator over NCCL (nccl_comm.h). The only file with NCCL calls.
//
// Ordering, per operation: an event recorded on the backend's compute stream
// is waited for by this communicator's stream (the collective reads what
// the kernels before it wrote), the NCCL call is queued on that stream, and
// an event recorded after it completes the Request: test() queries it,
// wait() makes the compute stream wait for it. Collectives are ordered by
// that stream wait alone (the host goes on queueing work); a point-to-point
// wait also blocks the host, bounded, as an MPI receive does (the pipeline's
// bubble is that time). No wait is unbounded: a host wait polls the event
// and ncclCommGetAsyncError, and every later call on the communicator polls
// its collectives still in flight the same way; past train.comm_timeout_s
// (or on an asynchronous error) the communicator is aborted and the job ends
// naming the group and the peer, as the MPI watchdog does.
//
// Collectives: all-reduce, reduce-scatter and all-gather (in place when the
// send buffer is the rank's slot of the receive buffer, which NCCL accepts),
// broadcast. Bytes are counted as the MPI communicator counts them (the
// ring convention of communicator.h).
//
// Point-to-point: NCCL matches a send with a receive by posting order
// between the two ranks (no tags), runs a communicator's operations in
// order, and a send does not complete before its receive starts. The
// pipeline executor relies on MPI's matching instead: per (source, tag), in
// posting order, with messages under different tags independent (it posts
// an edge's gradient receives at the forwards and the activations' at their
// instructions, pipeline.h). So open_routes gives every (source,
// destination, tag) route its own two-rank communicator (ncclCommSplit of
// this one, collective over the group) and stream: within a route, messages
// match in posting order as MPI's do within (source, tag); across routes
// nothing orders them. NCCL connects a route lazily, inside its first
// send/receive, which blocks the host until the peer makes its first call
// on it; the executor posts a gradient receive before the activation send
// that its peer waits for, which would deadlock in step 1. So open_routes
// also connects every route, one after another in the order given (the same
// on every rank): a one-byte message over each. isend/irecv on a route not
// opened end the job, naming it.
//
// This code compiles and links in CI; it has never run (no GPU). The same
// rules are enforced on gpu-emu by the staged communicator's strict mode.
#include "comm/nccl_comm.h"

#include <cuda_runtime.h>
#include <nccl.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <deque>
#include <fmt/format.h>
#include <map>
#include <string>
#include <tuple>
#include <vector>

#include "comm/job_abort.h"
#include "core/check.h"
#include "core/timer.h"

namespace tera {

namespace {

void check_cuda(cudaError_t e, const char* what) {
  TERA_ASSERT(e == cudaSuccess, std::string("nccl communicator: ") + what + ": " + cudaGetErrorString(e));
}
void check_nccl(ncclResult_t r, const char* what) {
  TERA_ASSERT(r == ncclSuccess, std::string("nccl communicator: ") + what + ": " + ncclGetErrorString(r));
}

ncclDataType_t nccl_type(CommType t) {
  switch (t) {
    case CommType::f32: return ncclFloat32;
    case CommType::f64: return ncclFloat64;
    case CommType::i32: return ncclInt32;
    case CommType::i64: return ncclInt64;
    case CommType::u8: return ncclUint8;
  }
  return ncclUint8;
}

ncclRedOp_t nccl_op(ReduceOp op) { return op == ReduceOp::sum ? ncclSum : ncclMax; }

class NcclComm;

// Polls `done` until it fires; ends the job past the timeout or on an
// asynchronous NCCL error of `comm` (aborting it first).
void wait_event(const Communicator& group, ncclComm_t comm, cudaEvent_t done, int peer, const std::string& op,
                double timeout_s) {
  const double t0 = now_seconds();
  for (;;) {
    const cudaError_t e = cudaEventQuery(done);
    if (e == cudaSuccess) return;
    if (e != cudaErrorNotReady) check_cuda(e, "cudaEventQuery");
    ncclResult_t async = ncclSuccess;
    check_nccl(ncclCommGetAsyncError(comm, &async), "ncclCommGetAsyncError");
    if (async != ncclSuccess) {
      ncclCommAbort(comm);
      end_job(group, fmt::format("{} on the {} group failed in NCCL: {}", op, group.name(), ncclGetErrorString(async)));
    }
    const double waited = now_seconds() - t0;
    if (waited > timeout_s) {
      ncclCommAbort(comm);
      end_job_after_hang(group, peer, op, waited, timeout_s);
    }
    if (waited > 0.5) usleep(200);
  }
}

struct NcclRequest final : Request::Impl {
  const Communicator* group;
  ncclComm_t comm;
  cudaEvent_t done = nullptr;
  cudaStream_t compute = nullptr;
  int peer;
  double timeout_s;
  bool host_waits;  // point-to-point
  NcclRequest(const Communicator& g, ncclComm_t c, cudaStream_t on, cudaStream_t compute_stream, int peer_rank,
              double timeout, bool p2p)
      : group(&g), comm(c), compute(compute_stream), peer(peer_rank), timeout_s(timeout), host_waits(p2p) {
    check_cuda(cudaEventCreateWithFlags(&done, cudaEventDisableTiming), "cudaEventCreate");
    check_cuda(cudaEventRecord(done, on), "cudaEventRecord");
  }
  ~NcclRequest() override {
    if (done != nullptr) cudaEventDestroy(done);
  }
  bool test() override {
    const cudaError_t e = cudaEventQuery(done);
    if (e == cudaErrorNotReady) return false;
    check_cuda(e, "cudaEventQuery");
    return true;
  }
  // The compute stream waits for the operation; for a message the host
  // waits (bounded) too.
  void wait() override {
    check_cuda(cudaStreamWaitEvent(compute, done, 0), "cudaStreamWaitEvent");
    if (host_waits) wait_event(*group, comm, done, peer, label, timeout_s);
  }
};

class NcclComm final : public Communicator {
 public:
  NcclComm(Communicator& host, ncclComm_t comm, cudaStream_t compute, double timeout_s)
      : host_(host), comm_(comm), compute_(compute), timeout_s_(timeout_s) {
    check_cuda(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking), "cudaStreamCreate");
    check_cuda(cudaEventCreateWithFlags(&ready_, cudaEventDisableTiming), "cudaEventCreate");
  }
  ~NcclComm() override {
    for (auto& [key, r] : routes_) {
      cudaStreamSynchronize(r.stream);
      ncclCommDestroy(r.comm);
      cudaStreamDestroy(r.stream);
    }
    if (token_ != nullptr) cudaFree(token_);
    for (const InFlight& f : in_flight_) cudaEventDestroy(f.done);
    cudaStreamSynchronize(stream_);
    ncclCommDestroy(comm_);
    cudaEventDestroy(ready_);
    cudaStreamDestroy(stream_);
  }
  int rank() const override { return host_.rank(); }
  int size() const override { return host_.size(); }
  std::string name() const override { return host_.name(); }
  int world_rank(int r) const override { return host_.world_rank(r); }

  Request iall_reduce(void* buf, int64_t count, CommType t, ReduceOp op) override {
    poll_in_flight();
    after_compute(stream_);
    check_nccl(ncclAllReduce(buf, buf, static_cast<size_t>(count), nccl_type(t), nccl_op(op), comm_, stream_),
               "ncclAllReduce");
    const int64_t b = count * comm_type_bytes(t);
    this->count(2 * (size() - 1) * b / size());
    return finish(label("all_reduce", b), comm_, stream_, -1, false);
  }
  Request ireduce_scatter(const void* send, void* recv, int64_t recv_count, CommType t, ReduceOp op) override {
    poll_in_flight();
    after_compute(stream_);
    check_nccl(ncclReduceScatter(send, recv, static_cast<size_t>(recv_count), nccl_type(t), nccl_op(op), comm_,
                                 stream_),
               "ncclReduceScatter");
    this->count((size() - 1) * recv_count * comm_type_bytes(t));
    return finish(label("reduce_scatter", size() * recv_count * comm_type_bytes(t)), comm_, stream_, -1, false);
  }
  Request iall_gather(const void* send, void* recv, int64_t send_count, CommType t) override {
    poll_in_flight();
    after_compute(stream_);
    check_nccl(ncclAllGather(send, recv, static_cast<size_t>(send_count), nccl_type(t), comm_, stream_),
               "ncclAllGather");
    const int64_t b = send_count * comm_type_bytes(t);
    this->count((size() - 1) * b);
    return finish(label("all_gather", size() * b), comm_, stream_, -1, false);
  }
  Request ibroadcast(void* buf, int64_t count, CommType t, int root) override {
    poll_in_flight();
    after_compute(stream_);
    check_nccl(ncclBroadcast(buf, buf, static_cast<size_t>(count), nccl_type(t), root, comm_, stream_),
               "ncclBroadcast");
    const int64_t b = count * comm_type_bytes(t);
    this->count(rank() == root ? b : 0);
    return finish(label("broadcast", b), comm_, stream_, root == rank() ? -1 : root, false);
  }
  Request isend(const void* buf, int64_t bytes, int dst, int tag) override {
    poll_in_flight();
    Route& r = route(rank(), dst, tag);
    after_compute(r.stream);
    check_nccl(ncclSend(buf, static_cast<size_t>(bytes), ncclUint8, r.peer, r.comm, r.stream), "ncclSend");
    this->count(bytes);
    return finish(label("send", bytes), r.comm, r.stream, dst, true);
  }
  Request irecv(void* buf, int64_t bytes, int src, int tag) override {
    poll_in_flight();
    Route& r = route(src, rank(), tag);
    after_compute(r.stream);  // the buffer's last readers on the compute stream come first
    check_nccl(ncclRecv(buf, static_cast<size_t>(bytes), ncclUint8, r.peer, r.comm, r.stream), "ncclRecv");
    return finish(label("recv", bytes), r.comm, r.stream, src, true);
  }
  Status open_routes(const std::vector<P2pRoute>& routes) override {
    for (size_t i = 0; i < routes.size(); ++i) {
      const P2pRoute& p = routes[i];
      if (p.src == p.dst || p.src < 0 || p.dst < 0 || p.src >= size() || p.dst >= size()) {
        return Status::error("nccl communicator " + name() + ": route " + std::to_string(p.src) + " -> " +
                             std::to_string(p.dst) + " is not between two ranks of the group");
      }
      // Opened before (a route of an earlier list): every rank knows, so every rank skips its split.
      if (std::find(opened_.begin(), opened_.end(), p) != opened_.end()) continue;
      opened_.push_back(p);
      const bool mine = p.src == rank() || p.dst == rank();
      ncclComm_t child = nullptr;
      // Every rank of the group takes part in every split; the two ends get
      // a communicator of 2 ranks ordered as in this one.
      const ncclResult_t res = ncclCommSplit(comm_, mine ? static_cast<int>(i) : NCCL_SPLIT_NOCOLOR, rank(), &child, nullptr);
      if (res != ncclSuccess) {
        return Status::error("ncclCommSplit for the " + name() + " route " + std::to_string(p.src) + " -> " +
                             std::to_string(p.dst) + " (tag " + std::to_string(p.tag) + "): " + ncclGetErrorString(res));
      }
      if (!mine) continue;
      Route r;
      r.comm = child;
      const int other = p.src == rank() ? p.dst : p.src;
      r.peer = other < rank() ? 0 : 1;  // its rank in the two-rank communicator
      check_cuda(cudaStreamCreateWithFlags(&r.stream, cudaStreamNonBlocking), "cudaStreamCreate");
      routes_[{p.src, p.dst, p.tag}] = r;
    }
    // Connect each route now, in the list's order on every rank: a one-byte
    // message, waited for before the next, so no rank waits in a first
    // send/receive later while its peer waits in another.
    if (token_ == nullptr) check_cuda(cudaMalloc(&token_, 1), "cudaMalloc (route token)");
    for (const P2pRoute& p : routes) {
      if (p.src != rank() && p.dst != rank()) continue;
      Route& r = route(p.src, p.dst, p.tag);
      if (r.connected) continue;
      r.connected = true;
      const int other = p.src == rank() ? p.dst : p.src;
      const ncclResult_t res = p.src == rank() ? ncclSend(token_, 1, ncclUint8, r.peer, r.comm, r.stream)
                                               : ncclRecv(token_, 1, ncclUint8, r.peer, r.comm, r.stream);
      if (res != ncclSuccess) {
        return Status::error("connecting the " + name() + " route " + std::to_string(p.src) + " -> " +
                             std::to_string(p.dst) + ": " + ncclGetErrorString(res));
      }
      cudaEvent_t done = nullptr;
      check_cuda(cudaEventCreateWithFlags(&done, cudaEventDisableTiming), "cudaEventCreate");
      check_cuda(cudaEventRecord(done, r.stream), "cudaEventRecord");
      wait_event(*this, r.comm, done, other, fmt::format("connecting the route {} -> {}", p.src, p.dst), timeout_s_);
      cudaEventDestroy(done);
    }
    return ok_status();
  }
  void barrier() override {
    poll_in_flight();
    wait_event(*this, comm_, record(stream_), -1, "barrier", timeout_s_);
    host_.barrier();
  }
  std::unique_ptr<Communicator> split(int, int, const std::string&) override {
    TERA_ASSERT(false, "split the host communicator, then make its device communicator");
    return nullptr;
  }

 private:
  // A point-to-point route's channel: a two-rank communicator and its stream.
  struct Route {
    ncclComm_t comm = nullptr;
    cudaStream_t stream = nullptr;
    int peer = 0;  // the other end's rank in comm
    bool connected = false;
  };
  Route& route(int src, int dst, int tag) {
    const auto it = routes_.find({src, dst, tag});
    if (it == routes_.end()) {
      end_job(*this, "nccl communicator " + name() + ": no route " + std::to_string(src) + " -> " + std::to_string(dst) +
                         " with tag " + std::to_string(tag) + " was opened (open_routes before the first send or receive)");
    }
    return it->second;
  }
  cudaEvent_t record(cudaStream_t on) {
    check_cuda(cudaEventRecord(ready_, on), "cudaEventRecord");
    return ready_;
  }
  // The operation about to be queued on `on` starts after what the compute
  // stream has queued so far.
  void after_compute(cudaStream_t on) {
    check_cuda(cudaEventRecord(ready_, compute_), "cudaEventRecord");
    check_cuda(cudaStreamWaitEvent(on, ready_, 0), "cudaStreamWaitEvent");
  }
  Request finish(std::string what, ncclComm_t comm, cudaStream_t on, int peer, bool p2p) {
    auto r = std::make_shared<NcclRequest>(*this, comm, on, compute_, peer, timeout_s_, p2p);
    r->label = std::move(what);
    if (!p2p) {  // watched by later calls (poll_in_flight)
      InFlight f{nullptr, now_seconds(), r->label};
      check_cuda(cudaEventCreateWithFlags(&f.done, cudaEventDisableTiming), "cudaEventCreate");
      check_cuda(cudaEventRecord(f.done, on), "cudaEventRecord");
      in_flight_.push_back(f);
    }
    return Request(r);
  }
  // The collectives still running: those done are dropped; one past the
  // timeout, or an asynchronous NCCL error, ends the job.
  void poll_in_flight() {
    while (!in_flight_.empty()) {
      InFlight& f = in_flight_.front();
      const cudaError_t e = cudaEventQuery(f.done);
      if (e == cudaErrorNotReady) {
        ncclResult_t async = ncclSuccess;
        check_nccl(ncclCommGetAsyncError(comm_, &async), "ncclCommGetAsyncError");
        if (async != ncclSuccess) {
          ncclCommAbort(comm_);
          end_job(*this, fmt::format("{} on the {} group failed in NCCL: {}", f.what, name(), ncclGetErrorString(async)));
        }
        const double waited = now_seconds() - f.issued;
        if (waited > timeout_s_) {
          ncclCommAbort(comm_);
          end_job_after_hang(*this, -1, f.what, waited, timeout_s_);
        }
        return;
      }
      check_cuda(e, "cudaEventQuery");
      cudaEventDestroy(f.done);
      in_flight_.pop_front();
    }
  }
  Communicator& host_;
  ncclComm_t comm_;
  cudaStream_t compute_;
  double timeout_s_;
  cudaStream_t stream_ = nullptr;
  cudaEvent_t ready_ = nullptr;
  void* token_ = nullptr;                               // one device byte: routes' connecting messages
  struct InFlight {
    cudaEvent_t done;
    double issued;
    std::string what;
  };
  std::deque<InFlight> in_flight_;  // collectives queued, oldest first
  std::map<std::tuple<int, int, int>, Route> routes_;  // (src, dst, tag) -> channel, on its two ends
  std::vector<P2pRoute> opened_;                        // every route split so far (the same on every rank)
};

}  // namespace

Expected<std::unique_ptr<Communicator>> make_nccl_communicator(Communicator& host, DeviceQueue& queue,
                                                               double timeout_s) {
  ncclUniqueId id;
  std::memset(&id, 0, sizeof id);
  if (host.rank() == 0) {
    const ncclResult_t r = ncclGetUniqueId(&id);
    if (r != ncclSuccess) return Status::error(std::string("ncclGetUniqueId: ") + ncclGetErrorString(r));
  }
  host.broadcast(&id, static_cast<int64_t>(sizeof id), CommType::u8, 0);
  ncclComm_t comm = nullptr;
  const ncclResult_t r = ncclCommInitRank(&comm, host.size(), id, host.rank());
  if (r != ncclSuccess) {
    return Status::error("ncclCommInitRank for the " + host.name() + " group (" + std::to_string(host.size()) +
                         " ranks): " + ncclGetErrorString(r));
  }
  auto compute = static_cast<cudaStream_t>(queue.native_stream(DeviceStream::compute));
  return std::unique_ptr<Communicator>(std::make_unique<NcclComm>(host, comm, compute, timeout_s));
}

}  // namespace tera
