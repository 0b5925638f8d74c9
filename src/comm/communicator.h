// The one interface through which ranks talk (DESIGN.md invariant 6): MPI for
// host buffers (mpi_comm.cpp), an in-process world of N threads
// (in_process_comm.cpp: one-process runs and unit tests), NCCL for device
// buffers (nccl_comm.cpp, where built). Nothing outside src/comm/ calls MPI
// or NCCL.
//
// Collective semantics (all ranks of the communicator call in the same order):
//   all_reduce(buf, n)            buf[i] = op over ranks of buf[i]            (in place)
//   reduce_scatter(send, recv, n) recv[i] = op over ranks of send[rank*n + i] (send holds size*n)
//   all_gather(send, recv, n)     recv[r*n + i] = send_r[i]; send may be recv + rank*n (in place)
//   broadcast(buf, n, root)       buf = buf_root
// Bytes counted per rank are what a bandwidth-optimal ring sends (the
// nccl-tests "bus bandwidth" convention, also used by the planner):
//   all_reduce 2(p-1)/p * S, reduce_scatter and all_gather (p-1)/p * S with S
//   the full buffer (p * n elements), broadcast S, send S.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "core/status.h"
#include "core/trace.h"

namespace tera {

enum class CommType { f32, f64, i32, i64, u8 };
enum class ReduceOp { sum, max };

int64_t comm_type_bytes(CommType t);

// Messages from rank src to rank dst of a communicator under one tag.
struct P2pRoute {
  int src = 0, dst = 0, tag = 0;
  bool operator==(const P2pRoute&) const = default;
};

// A pending non-blocking operation. wait() through the communicator that made it.
class Request {
 public:
  struct Impl {
    virtual ~Impl() = default;
    virtual bool test() = 0;  // true once complete (and progresses the operation)
    virtual void wait() = 0;
    std::string label;        // "all_reduce dp 1.5 MB": the span name in traces
  };
  Request() = default;
  explicit Request(std::shared_ptr<Impl> impl) : impl_(std::move(impl)) {}
  bool pending() const { return impl_ != nullptr; }
  Impl* impl() const { return impl_.get(); }
  void reset() { impl_.reset(); }

 private:
  std::shared_ptr<Impl> impl_;
};

struct CommStats {
  int64_t bytes = 0;         // per-rank bytes under the ring model above
  double wait_seconds = 0;   // time blocked in blocking calls and wait()
  int64_t calls = 0;
  void operator+=(const CommStats& o) {
    bytes += o.bytes;
    wait_seconds += o.wait_seconds;
    calls += o.calls;
  }
};

class Communicator {
 public:
  virtual ~Communicator() = default;
  virtual int rank() const = 0;
  virtual int size() const = 0;
  virtual std::string name() const = 0;  // "tp", "dp", ... for logs
  // The world rank of this communicator's rank r (for messages naming a peer);
  // r itself where the communicator does not know its world.
  virtual int world_rank(int r) const { return r; }

  // Non-blocking collectives and point-to-point; the blocking forms wait.
  virtual Request iall_reduce(void* buf, int64_t count, CommType t, ReduceOp op) = 0;
  virtual Request ireduce_scatter(const void* send, void* recv, int64_t recv_count, CommType t, ReduceOp op) = 0;
  virtual Request iall_gather(const void* send, void* recv, int64_t send_count, CommType t) = 0;
  virtual Request ibroadcast(void* buf, int64_t count, CommType t, int root) = 0;
  virtual Request isend(const void* buf, int64_t bytes, int dst, int tag) = 0;
  virtual Request irecv(void* buf, int64_t bytes, int src, int tag) = 0;
  // Collective: every rank passes the same routes in the same order before
  // its first isend/irecv on them. Communicators that match messages by
  // (source, tag) need nothing (MPI, the in-process world: the default);
  // NCCL, which matches by posting order alone and runs one communicator's
  // operations in order, gives each route a channel of its own (nccl_comm.cpp)
  // and refuses a message on a route not opened.
  virtual Status open_routes(const std::vector<P2pRoute>& routes) {
    (void)routes;
    return ok_status();
  }
  virtual void barrier() = 0;
  // A new communicator over the ranks that pass the same color, ordered by
  // (key, rank). Collective over this communicator.
  virtual std::unique_ptr<Communicator> split(int color, int key, const std::string& name) = 0;

  void wait(Request& r);
  bool test(Request& r);  // progresses r; resets it and returns true once complete
  void all_reduce(void* buf, int64_t count, CommType t, ReduceOp op = ReduceOp::sum);
  void reduce_scatter(const void* send, void* recv, int64_t recv_count, CommType t, ReduceOp op = ReduceOp::sum);
  void all_gather(const void* send, void* recv, int64_t send_count, CommType t);
  void broadcast(void* buf, int64_t count, CommType t, int root);
  void send(const void* buf, int64_t bytes, int dst, int tag);
  void recv(void* buf, int64_t bytes, int src, int tag);

  // Typed shorthands.
  void all_reduce_sum(float* buf, int64_t n) { all_reduce(buf, n, CommType::f32, ReduceOp::sum); }
  double all_reduce_sum(double v) {
    all_reduce(&v, 1, CommType::f64, ReduceOp::sum);
    return v;
  }
  double all_reduce_max(double v) {
    all_reduce(&v, 1, CommType::f64, ReduceOp::max);
    return v;
  }

  const CommStats& stats() const { return stats_; }
  void reset_stats() { stats_ = CommStats{}; }
  // Record a span for every wait on this communicator (null: stop).
  void set_trace(Trace* trace) { trace_ = trace; }

 protected:
  // A trace label for an operation of `bytes` bytes ("all_reduce tp 1.5 MB").
  std::string label(const char* op, int64_t bytes) const;
  Trace* trace_ = nullptr;
  void count(int64_t bytes) {
    stats_.bytes += bytes;
    ++stats_.calls;
  }
  CommStats stats_;
};

}  // namespace tera
