// The staged device communicator (staged_comm.h).
//
// An operation is a list of pieces (chunks); each piece goes
//   down:  device -> pinned, on the comm stream after the compute stream's
//          event (sends, and the sending side of collectives)
//   host:  the host communicator's non-blocking operation on the pinned
//          buffer, started in issue order once its copy is down
//   up:    pinned -> device on the comm stream (receives, collective results)
//   done:  the up copy has run (or, for a send, the host operation is done).
// The pinned buffers it stages through are staged_pool.cpp; an operation and
// its pieces, staged_op.h.
#include "comm/staged_comm.h"

#include <unistd.h>

#include <algorithm>
#include <deque>
#include <fmt/format.h>
#include <set>
#include <string>
#include <tuple>
#include <vector>

#include "comm/job_abort.h"
#include "comm/staged_op.h"
#include "core/check.h"
#include "core/timer.h"

namespace tera {

namespace staged {

namespace {

constexpr int kHandshakeTagBase = 1 << 14;  // above every route tag (pipeline tags are small)

const char* op_name(OpKind k) {
  switch (k) {
    case OpKind::all_reduce: return "all_reduce";
    case OpKind::reduce_scatter: return "reduce_scatter";
    case OpKind::all_gather: return "all_gather";
    case OpKind::broadcast: return "broadcast";
    case OpKind::send: return "send";
    case OpKind::recv: return "recv";
  }
  return "?";
}

}  // namespace

class StagedComm final : public Communicator {
 public:
  StagedComm(Communicator& host, std::shared_ptr<StagedProgress> progress, const StagedOptions& o)
      : host_(host), progress_(std::move(progress)), q_(progress_->queue), opts_(o) {
    data_ = host_.split(0, host_.rank(), host_.name());
    if (opts_.strict) check_ = host_.split(0, host_.rank(), host_.name() + " (order check)");
    progress_->comms.push_back(this);
  }
  ~StagedComm() override {
    drain();
    auto& v = progress_->comms;
    v.erase(std::remove(v.begin(), v.end(), this), v.end());
  }
  int rank() const override { return host_.rank(); }
  int size() const override { return host_.size(); }
  std::string name() const override { return host_.name(); }
  int world_rank(int r) const override { return host_.world_rank(r); }

  Request iall_reduce(void* buf, int64_t count, CommType t, ReduceOp op) override {
    auto o = make(OpKind::all_reduce, t, count);
    o->reduce = op;
    o->src = buf;
    o->dst = buf;
    const int64_t b = count * comm_type_bytes(t);
    o->stage = progress_->pool.take(b);
    chunk(*o, b);
    this->count(2 * (size() - 1) * b / size());
    return issue(o, label("all_reduce", b));
  }
  Request ireduce_scatter(const void* send, void* recv, int64_t recv_count, CommType t, ReduceOp op) override {
    auto o = make(OpKind::reduce_scatter, t, recv_count);
    o->reduce = op;
    o->src = send;
    o->dst = recv;
    const int64_t b = recv_count * comm_type_bytes(t);
    o->stage = progress_->pool.take(b * size());
    o->stage_out = progress_->pool.take(b);
    o->pieces.push_back(Piece{0, b * size()});
    this->count((size() - 1) * b);
    return issue(o, label("reduce_scatter", b * size()));
  }
  Request iall_gather(const void* send, void* recv, int64_t send_count, CommType t) override {
    auto o = make(OpKind::all_gather, t, send_count);
    o->src = send;
    o->dst = recv;
    const int64_t b = send_count * comm_type_bytes(t);
    o->stage = progress_->pool.take(b * size());
    o->pieces.push_back(Piece{0, b * size()});
    this->count((size() - 1) * b);
    return issue(o, label("all_gather", b * size()));
  }
  Request ibroadcast(void* buf, int64_t count, CommType t, int root) override {
    auto o = make(OpKind::broadcast, t, count);
    o->root = root;
    o->peer = root == rank() ? -1 : root;
    o->src = buf;
    o->dst = buf;
    const int64_t b = count * comm_type_bytes(t);
    o->stage = progress_->pool.take(b);
    chunk(*o, b);
    this->count(rank() == root ? b : 0);
    return issue(o, label("broadcast", b));
  }
  Request isend(const void* buf, int64_t bytes, int dst, int tag) override {
    connect({rank(), dst, tag}, "send");
    auto o = make(OpKind::send, CommType::u8, bytes);
    o->peer = dst;
    o->tag = tag;
    o->src = buf;
    o->stage = progress_->pool.take(bytes);
    o->pieces.push_back(Piece{0, bytes});
    this->count(bytes);
    return issue(o, label("send", bytes));
  }
  Request irecv(void* buf, int64_t bytes, int src, int tag) override {
    connect({src, rank(), tag}, "receive");
    auto o = make(OpKind::recv, CommType::u8, bytes);
    o->peer = src;
    o->tag = tag;
    o->dst = buf;
    o->stage = progress_->pool.take(bytes);
    o->pieces.push_back(Piece{0, bytes});
    return issue(o, label("recv", bytes));
  }
  // Strict mode: every route connected now, in the order given (the same on
  // every rank, so no two ranks wait for each other in opposite orders).
  Status open_routes(const std::vector<P2pRoute>& routes) override {
    for (const P2pRoute& r : routes) {
      if (r.src == r.dst || r.src < 0 || r.dst < 0 || r.src >= size() || r.dst >= size()) {
        return Status::error("staged device communicator " + name() + ": route " + std::to_string(r.src) + " -> " +
                             std::to_string(r.dst) + " is not between two ranks of the group");
      }
      if (r.tag < 0 || 2 * r.tag + 1 >= kHandshakeTagBase) {
        return Status::error("staged device communicator " + name() + ": route tag " + std::to_string(r.tag) +
                             " is out of range");
      }
      if (r.src == rank() || r.dst == rank()) connect(r, "open_routes");
    }
    return ok_status();
  }
  void barrier() override {
    drain();
    data_->barrier();
  }
  std::unique_ptr<Communicator> split(int, int, const std::string&) override {
    TERA_ASSERT(false, "split the host communicator, then make its device communicator");
    return nullptr;
  }

  // Advances every pending operation as far as it goes without blocking.
  void progress() {
    for (auto& op : pending_) advance(*op);
    while (!pending_.empty() && pending_.front()->complete()) {
      retired_pieces_ += static_cast<int64_t>(pending_.front()->pieces.size());
      pending_.pop_front();
    }
  }

  // Until `op` has queued its last copy up (the compute stream then waits
  // for it) or, for a send, its transfer is done; every other staged
  // operation of the rank advances meanwhile.
  void wait_op(StagedOp& op) {
    const double t0 = now_seconds();
    for (int spins = 0; !ready(op); ++spins) {
      progress_->progress();
      if (ready(op)) break;
      // Waiting for its copy down: the device gets there without the host
      // (nothing the device waits for needs this rank's MPI), so block.
      if (DeviceQueue::Event e = device_event_blocking(op); e != nullptr && !q_.event_done(e)) {
        q_.event_wait(e);
        continue;
      }
      const double waited = now_seconds() - t0;
      if (waited > opts_.timeout_s) {
        end_job_after_hang(*this, op.peer, std::string(op_name(op.kind)) + (op.kind == OpKind::send || op.kind == OpKind::recv
                                                                           ? fmt::format(" (tag {})", op.tag)
                                                                           : std::string()),
                           waited, opts_.timeout_s);
      }
      // MPI progresses only when polled; past a short spin, poll gently
      // (the rank's device threads may need this core).
      if (spins > 200) usleep(waited > 0.5 ? 200 : 20);
    }
    for (Piece& p : op.pieces) {
      if (p.up != nullptr) q_.stream_wait(DeviceStream::compute, p.up);
    }
  }

  // The copy down `op` waits for, when that is what it waits for.
  static DeviceQueue::Event device_event_blocking(const StagedOp& op) {
    for (const Piece& p : op.pieces) {
      if (p.state == Piece::State::down) return p.down;
    }
    return nullptr;
  }

  StagedProgress& engine() { return *progress_; }

 private:
  std::shared_ptr<StagedOp> make(OpKind kind, CommType t, int64_t count) {
    auto o = std::make_shared<StagedOp>(*this, progress_, kind);
    o->type = t;
    o->count = count;
    return o;
  }
  // Pieces of at most chunk_bytes (whole elements) over b bytes.
  void chunk(StagedOp& o, int64_t b) {
    const int64_t unit = comm_type_bytes(o.type);
    const int64_t step = std::max<int64_t>(unit, opts_.chunk_bytes / unit * unit);
    for (int64_t off = 0; off < b; off += step) o.pieces.push_back(Piece{off, std::min(step, b - off)});
  }

  // Orders the operation after the compute stream, queues its copies down,
  // and (strict) starts its order check.
  Request issue(const std::shared_ptr<StagedOp>& o, std::string what) {
    o->label = std::move(what);
    DeviceQueue::Event after_compute = q_.event_create();
    q_.event_record(after_compute, DeviceStream::compute);
    q_.stream_wait(DeviceStream::comm, after_compute);
    q_.event_destroy(after_compute);
    const int64_t unit = comm_type_bytes(o->type);
    for (Piece& p : o->pieces) {
      const uint8_t* from = static_cast<const uint8_t*>(o->src);
      switch (o->kind) {
        case OpKind::all_reduce:
        case OpKind::reduce_scatter:
        case OpKind::send: q_.copy_async(o->stage + p.offset, from + p.offset, p.bytes, CopyKind::device_to_host, DeviceStream::comm); break;
        case OpKind::all_gather: {
          const int64_t b = o->count * unit;
          q_.copy_async(o->stage + rank() * b, from, b, CopyKind::device_to_host, DeviceStream::comm);
          break;
        }
        case OpKind::broadcast:
          if (rank() == o->root) {
            q_.copy_async(o->stage + p.offset, from + p.offset, p.bytes, CopyKind::device_to_host, DeviceStream::comm);
          }
          break;
        case OpKind::recv: break;
      }
      p.down = q_.event_create();
      q_.event_record(p.down, DeviceStream::comm);
    }
    if (opts_.strict && o->kind != OpKind::send && o->kind != OpKind::recv) {
      o->sequence = ++collectives_;
      const int64_t sig = (static_cast<int64_t>(o->kind) << 56) ^ (static_cast<int64_t>(o->type) << 52) ^
                          (static_cast<int64_t>(o->reduce) << 50) ^ (static_cast<int64_t>(o->root) << 40) ^ o->count;
      o->signature[0] = sig;
      o->signature[1] = -sig;
      o->check = check_->iall_reduce(o->signature, 2, CommType::i64, ReduceOp::max);
      o->check_pending = true;
    }
    pending_.push_back(o);
    advance(*o);
    return Request(o);
  }

  void advance(StagedOp& o) {
    if (o.check_pending && check_->test(o.check)) {
      o.check_pending = false;
      if (o.signature[0] != -o.signature[1]) {
        end_job(*this, fmt::format("collective #{} of the {} device communicator is {} of {} elements here, but another "
                                   "rank issued a different collective as its #{}: the ranks of a communicator must "
                                   "issue its collectives in one order (NCCL hangs or corrupts otherwise)",
                                   o.sequence, name(), op_name(o.kind), o.count, o.sequence));
      }
    }
    for (Piece& p : o.pieces) {
      switch (p.state) {
        case Piece::State::down:
          // Transfers start in issue order: this one only after every earlier one.
          if (&p != next_start() || !q_.event_done(p.down)) return;
          start_host(o, p);
          p.state = Piece::State::host;
          ++started_;
          [[fallthrough]];
        case Piece::State::host:
          if (!data_->test(p.host)) break;
          queue_up(o, p);
          [[fallthrough]];
        case Piece::State::up:
          if (p.up != nullptr && !q_.event_done(p.up)) break;
          p.state = Piece::State::done;
          break;
        case Piece::State::done: break;
      }
    }
  }

  // The piece whose transfer starts next (the oldest not started).
  const Piece* next_start() const {
    int64_t k = started_ - retired_pieces_;
    for (const auto& op : pending_) {
      if (k < static_cast<int64_t>(op->pieces.size())) return &op->pieces[static_cast<size_t>(k)];
      k -= static_cast<int64_t>(op->pieces.size());
    }
    return nullptr;
  }

  void start_host(StagedOp& o, Piece& p) {
    const int64_t unit = comm_type_bytes(o.type);
    uint8_t* s = o.stage + p.offset;
    switch (o.kind) {
      case OpKind::all_reduce: p.host = data_->iall_reduce(s, p.bytes / unit, o.type, o.reduce); break;
      case OpKind::reduce_scatter: p.host = data_->ireduce_scatter(o.stage, o.stage_out, o.count, o.type, o.reduce); break;
      case OpKind::all_gather:
        p.host = data_->iall_gather(o.stage + rank() * o.count * unit, o.stage, o.count, o.type);
        break;
      case OpKind::broadcast: p.host = data_->ibroadcast(s, p.bytes / unit, o.type, o.root); break;
      case OpKind::send: p.host = data_->isend(s, p.bytes, o.peer, o.tag); break;
      case OpKind::recv: p.host = data_->irecv(s, p.bytes, o.peer, o.tag); break;
    }
  }

  // The transfer is done: its result goes up (nothing for a send).
  void queue_up(StagedOp& o, Piece& p) {
    p.state = Piece::State::up;
    if (o.kind == OpKind::send) return;
    auto* to = static_cast<uint8_t*>(o.dst);
    switch (o.kind) {
      case OpKind::reduce_scatter: q_.copy_async(to, o.stage_out, p.bytes / size(), CopyKind::host_to_device, DeviceStream::comm); break;
      default: q_.copy_async(to + p.offset, o.stage + p.offset, p.bytes, CopyKind::host_to_device, DeviceStream::comm); break;
    }
    p.up = q_.event_create();
    q_.event_record(p.up, DeviceStream::comm);
  }

  // Every piece's transfer done and its copy up queued (the compute
  // stream can be made to wait for it), and the order check passed.
  static bool ready(const StagedOp& o) {
    if (o.check_pending) return false;
    return std::all_of(o.pieces.begin(), o.pieces.end(),
                       [](const Piece& p) { return p.state == Piece::State::up || p.state == Piece::State::done; });
  }

  // Every pending operation to its end, oldest first (the host waits).
  void drain() {
    while (!pending_.empty()) {
      const std::shared_ptr<StagedOp> o = pending_.front();
      wait_op(*o);
      for (Piece& p : o->pieces) {
        if (p.up != nullptr) q_.event_wait(p.up);
        p.state = Piece::State::done;
      }
      progress();  // drops it (and any completed after it)
    }
  }

  // Strict mode: a route's first send or receive waits for the peer's
  // first call on it (NCCL connects lazily, blocking the host until both
  // ends meet). A 1-byte token each way on the handshake tag of the route.
  void connect(const P2pRoute& r, const char* first_call) {
    if (!opts_.strict) return;
    const auto key = std::make_tuple(r.src, r.dst, r.tag);
    if (connected_.count(key) != 0) return;
    connected_.insert(key);
    const int peer = r.src == rank() ? r.dst : r.src;
    const int tag = kHandshakeTagBase + 2 * r.tag + (r.src < r.dst ? 0 : 1);
    uint8_t out = 1, in = 0;
    Request s = data_->isend(&out, 1, peer, tag), v = data_->irecv(&in, 1, peer, tag);
    const double t0 = now_seconds();
    while (!(data_->test(s) & data_->test(v))) {
      const double waited = now_seconds() - t0;
      if (waited > opts_.timeout_s) {
        end_job_after_hang(*this, peer, fmt::format("the first {} on the route {} -> {} (tag {})", first_call,
                                                     world_rank(r.src), world_rank(r.dst), r.tag),
                           waited, opts_.timeout_s,
                           "NCCL connects a route at its first send or receive, which waits until both ends have "
                           "called; connect every route at open_routes, in one order on every rank");
      }
      if (waited > 0.5) usleep(200);
    }
  }

  Communicator& host_;
  std::shared_ptr<StagedProgress> progress_;
  DeviceQueue& q_;
  StagedOptions opts_;
  std::unique_ptr<Communicator> data_;   // this communicator's transfers (and handshakes)
  std::unique_ptr<Communicator> check_;  // strict mode: the collectives' order checks
  std::deque<std::shared_ptr<StagedOp>> pending_;  // issue order
  int64_t started_ = 0;         // pieces whose transfer started, since the first
  int64_t retired_pieces_ = 0;  // pieces of operations dropped from pending_
  int64_t collectives_ = 0;
  std::set<std::tuple<int, int, int>> connected_;
};

bool StagedOp::test() {
  comm_->engine().progress();
  return complete();
}
void StagedOp::wait() { comm_->wait_op(*this); }

}  // namespace staged

void StagedProgress::progress() {
  for (staged::StagedComm* c : comms) c->progress();
}

std::unique_ptr<Communicator> make_staged_communicator(Communicator& host, std::shared_ptr<StagedProgress> progress,
                                                       const StagedOptions& options) {
  return std::make_unique<staged::StagedComm>(host, std::move(progress), options);
}

}  // namespace tera
