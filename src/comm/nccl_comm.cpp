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
// Point-to-point is not built: NCCL matches sends and receives by posting
// order rather than by tag, and a queued send blocks its stream until the
// peer's receive starts, so the pipeline schedules' exchanges would have to
// be grouped (ncclGroupStart/End) per step. tera train refuses parallel.pp >
// 1 on a device backend before it gets here.
//
// This code compiles and links in CI; it has never run (no GPU).
#include "comm/nccl_comm.h"

#include <cuda_runtime.h>
#include <nccl.h>

#include <cstring>
#include <string>

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
  Request isend(const void*, int64_t, int, int) override {
    TERA_ASSERT(false, "nccl communicator: point-to-point is not built (tera train refuses parallel.pp > 1 here)");
    return Request();
  }
  Request irecv(void*, int64_t, int, int) override {
    TERA_ASSERT(false, "nccl communicator: point-to-point is not built (tera train refuses parallel.pp > 1 here)");
    return Request();
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
  void after_compute() {
    check_cuda(cudaEventRecord(ready_, compute_), "cudaEventRecord");
    check_cuda(cudaStreamWaitEvent(stream_, ready_, 0), "cudaStreamWaitEvent");
  }
  Request finish(std::string what) {
    auto r = std::make_shared<NcclRequest>(stream_, compute_);
    r->label = std::move(what);
    return Request(r);
  }
  Communicator& host_;
  ncclComm_t comm_;
  cudaStream_t compute_;
  cudaStream_t stream_ = nullptr;
  cudaEvent_t ready_ = nullptr;
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
