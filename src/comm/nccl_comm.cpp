// Device communicator over NCCL (nccl_comm.h). The only file with NCCL calls.
//
// Ordering, per operation: an event recorded on the backend's compute stream
// is waited for by this communicator's stream (the collective reads what
// the kernels before it wrote), the NCCL call is queued on that stream, and
// an event recorded after it completes the Request: test() queries it,
// wait() makes the compute stream wait for it and blocks the host until it
// has fired (callers read results after waiting).
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
// this one, collective over the group) and stream: within a route,
// messages match in posting order as MPI's do within (source, tag); across
// routes nothing orders them. isend/irecv on a route not opened abort,
// naming it. Each route's communicator has its own NCCL resources (no
// splitShare), a few buffers per route: pipelines open 2 to 3 routes per
// stage edge.
//
// This code compiles and links in CI; it has never run (no GPU).
#include "comm/nccl_comm.h"

#include <cuda_runtime.h>
#include <nccl.h>

#include <algorithm>
#include <cstring>
#include <map>
#include <string>
#include <tuple>
#include <vector>

#include "core/check.h"

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

struct NcclRequest final : Request::Impl {
  cudaEvent_t done = nullptr;
  cudaStream_t compute = nullptr;
  NcclRequest(cudaStream_t comm_stream, cudaStream_t compute_stream) : compute(compute_stream) {
    check_cuda(cudaEventCreateWithFlags(&done, cudaEventDisableTiming), "cudaEventCreate");
    check_cuda(cudaEventRecord(done, comm_stream), "cudaEventRecord");
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
  void wait() override {
    check_cuda(cudaStreamWaitEvent(compute, done, 0), "cudaStreamWaitEvent");
    check_cuda(cudaEventSynchronize(done), "cudaEventSynchronize");
  }
};

class NcclComm final : public Communicator {
 public:
  NcclComm(Communicator& host, ncclComm_t comm, cudaStream_t compute) : host_(host), comm_(comm), compute_(compute) {
    check_cuda(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking), "cudaStreamCreate");
    check_cuda(cudaEventCreateWithFlags(&ready_, cudaEventDisableTiming), "cudaEventCreate");
  }
  ~NcclComm() override {
    for (auto& [key, r] : routes_) {
      cudaStreamSynchronize(r.stream);
      ncclCommDestroy(r.comm);
      cudaStreamDestroy(r.stream);
    }
    cudaStreamSynchronize(stream_);
    ncclCommDestroy(comm_);
    cudaEventDestroy(ready_);
    cudaStreamDestroy(stream_);
  }
  int rank() const override { return host_.rank(); }
  int size() const override { return host_.size(); }
  std::string name() const override { return host_.name(); }

  Request iall_reduce(void* buf, int64_t count, CommType t, ReduceOp op) override {
    after_compute();
    check_nccl(ncclAllReduce(buf, buf, static_cast<size_t>(count), nccl_type(t), nccl_op(op), comm_, stream_),
               "ncclAllReduce");
    const int64_t b = count * comm_type_bytes(t);
    this->count(2 * (size() - 1) * b / size());
    return finish(label("all_reduce", b));
  }
  Request ireduce_scatter(const void* send, void* recv, int64_t recv_count, CommType t, ReduceOp op) override {
    after_compute();
    check_nccl(ncclReduceScatter(send, recv, static_cast<size_t>(recv_count), nccl_type(t), nccl_op(op), comm_,
                                 stream_),
               "ncclReduceScatter");
    this->count((size() - 1) * recv_count * comm_type_bytes(t));
    return finish(label("reduce_scatter", size() * recv_count * comm_type_bytes(t)));
  }
  Request iall_gather(const void* send, void* recv, int64_t send_count, CommType t) override {
    after_compute();
    check_nccl(ncclAllGather(send, recv, static_cast<size_t>(send_count), nccl_type(t), comm_, stream_),
               "ncclAllGather");
    const int64_t b = send_count * comm_type_bytes(t);
    this->count((size() - 1) * b);
    return finish(label("all_gather", size() * b));
  }
  Request ibroadcast(void* buf, int64_t count, CommType t, int root) override {
    after_compute();
    check_nccl(ncclBroadcast(buf, buf, static_cast<size_t>(count), nccl_type(t), root, comm_, stream_),
               "ncclBroadcast");
    const int64_t b = count * comm_type_bytes(t);
    this->count(rank() == root ? b : 0);
    return finish(label("broadcast", b));
  }
  Request isend(const void* buf, int64_t bytes, int dst, int tag) override {
    Route& r = route(rank(), dst, tag);
    after_compute(r.stream);
    check_nccl(ncclSend(buf, static_cast<size_t>(bytes), ncclUint8, r.peer, r.comm, r.stream), "ncclSend");
    this->count(bytes);
    return finish(label("send", bytes), r.stream);
  }
  Request irecv(void* buf, int64_t bytes, int src, int tag) override {
    Route& r = route(src, rank(), tag);
    after_compute(r.stream);  // the buffer's last readers on the compute stream come first
    check_nccl(ncclRecv(buf, static_cast<size_t>(bytes), ncclUint8, r.peer, r.comm, r.stream), "ncclRecv");
    return finish(label("recv", bytes), r.stream);
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
    return ok_status();
  }
  void barrier() override {
    check_cuda(cudaStreamSynchronize(stream_), "cudaStreamSynchronize");
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
  };
  Route& route(int src, int dst, int tag) {
    const auto it = routes_.find({src, dst, tag});
    TERA_ASSERT(it != routes_.end(), "nccl communicator " + name() + ": no route " + std::to_string(src) + " -> " +
                                         std::to_string(dst) + " with tag " + std::to_string(tag) +
                                         " was opened (open_routes before the first send or receive)");
    return it->second;
  }
  // The operation about to be queued on `on` starts after what the compute
  // stream has queued so far.
  void after_compute(cudaStream_t on) {
    check_cuda(cudaEventRecord(ready_, compute_), "cudaEventRecord");
    check_cuda(cudaStreamWaitEvent(on, ready_, 0), "cudaStreamWaitEvent");
  }
  void after_compute() { after_compute(stream_); }
  Request finish(std::string what) { return finish(std::move(what), stream_); }
  Request finish(std::string what, cudaStream_t on) {
    auto r = std::make_shared<NcclRequest>(on, compute_);
    r->label = std::move(what);
    return Request(r);
  }
  Communicator& host_;
  ncclComm_t comm_;
  cudaStream_t compute_;
  cudaStream_t stream_ = nullptr;
  cudaEvent_t ready_ = nullptr;
  std::map<std::tuple<int, int, int>, Route> routes_;  // (src, dst, tag) -> channel, on its two ends
  std::vector<P2pRoute> opened_;                        // every route split so far (the same on every rank)
};

}  // namespace

Expected<std::unique_ptr<Communicator>> make_nccl_communicator(Communicator& host, void* compute_stream) {
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
  return std::unique_ptr<Communicator>(std::make_unique<NcclComm>(host, comm, static_cast<cudaStream_t>(compute_stream)));
}

}  // namespace tera
