// Blocking forms and accounting shared by every Communicator implementation.
#include "comm/communicator.h"

#include <cstdio>

#include "core/check.h"
#include "core/timer.h"

namespace tera {

int64_t comm_type_bytes(CommType t) {
  switch (t) {
    case CommType::f32:
    case CommType::i32: return 4;
    case CommType::f64:
    case CommType::i64: return 8;
    case CommType::u8: return 1;
  }
  return 0;
}

void Communicator::wait(Request& r) {
  if (!r.pending()) return;
  const double t0 = now_seconds();
  r.impl()->wait();
  const double t1 = now_seconds();
  stats_.wait_seconds += t1 - t0;
  if (trace_ != nullptr) trace_->span(r.impl()->label.empty() ? "wait " + name() : r.impl()->label, "comm", t0, t1);
  r.reset();
}

std::string Communicator::label(const char* op, int64_t bytes) const {
  char buf[96];
  if (bytes < 1000) {  // a scalar's reduction reads "8 B", never "0.0 KB"
    std::snprintf(buf, sizeof(buf), "%s %s %lld B", op, name().c_str(), static_cast<long long>(bytes));
  } else if (bytes >= (1 << 20)) {
    std::snprintf(buf, sizeof(buf), "%s %s %.1f MB", op, name().c_str(), static_cast<double>(bytes) / 1e6);
  } else {
    std::snprintf(buf, sizeof(buf), "%s %s %.1f KB", op, name().c_str(), static_cast<double>(bytes) / 1e3);
  }
  return buf;
}

bool Communicator::test(Request& r) {
  if (!r.pending()) return true;
  if (!r.impl()->test()) return false;
  r.reset();
  return true;
}

void Communicator::all_reduce(void* buf, int64_t count, CommType t, ReduceOp op) {
  Request r = iall_reduce(buf, count, t, op);
  wait(r);
}

void Communicator::reduce_scatter(const void* send, void* recv, int64_t recv_count, CommType t, ReduceOp op) {
  Request r = ireduce_scatter(send, recv, recv_count, t, op);
  wait(r);
}

void Communicator::all_gather(const void* send, void* recv, int64_t send_count, CommType t) {
  Request r = iall_gather(send, recv, send_count, t);
  wait(r);
}

void Communicator::broadcast(void* buf, int64_t count, CommType t, int root) {
  Request r = ibroadcast(buf, count, t, root);
  wait(r);
}

void Communicator::send(const void* buf, int64_t bytes, int dst, int tag) {
  Request r = isend(buf, bytes, dst, tag);
  wait(r);
}

void Communicator::recv(void* buf, int64_t bytes, int src, int tag) {
  Request r = irecv(buf, bytes, src, tag);
  wait(r);
}

}  // namespace tera
