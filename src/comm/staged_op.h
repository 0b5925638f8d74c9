// One operation of the staged device communicator (internal to comm/;
// staged_pool.cpp and staged_comm.cpp): its kind, its device buffers and
// pinned staging, and its pieces (chunks), each moving down -> host -> up ->
// done (staged_comm.cpp). It is complete when every piece is done and, in
// strict mode, its order check has passed; its destructor retires it.
#pragma once

#include <algorithm>
#include <cstdint>
#include <memory>
#include <vector>

#include "comm/communicator.h"
#include "comm/staged_pool.h"
#include "core/device_memory.h"

namespace tera {

namespace staged {

enum class OpKind { all_reduce, reduce_scatter, all_gather, broadcast, send, recv };

struct Piece {
  Piece(int64_t at, int64_t n) : offset(at), bytes(n) {}
  int64_t offset = 0, bytes = 0;  // within the operation's device buffer and its staging
  enum class State { down, host, up, done } state = State::down;
  DeviceQueue::Event down = nullptr, up = nullptr;
  Request host;
};

struct StagedOp final : public Request::Impl {
  StagedOp(StagedComm& comm, std::shared_ptr<StagedProgress> progress, OpKind kind)
      : comm_(&comm), progress_(std::move(progress)), kind(kind) {}
  ~StagedOp() override { retire(*progress_, *this); }
  bool test() override;  // staged_comm.cpp
  void wait() override;

  bool complete() const {
    if (check_pending) return false;
    return std::all_of(pieces.begin(), pieces.end(), [](const Piece& p) { return p.state == Piece::State::done; });
  }

  StagedComm* comm_;
  std::shared_ptr<StagedProgress> progress_;
  OpKind kind;
  CommType type = CommType::u8;
  ReduceOp reduce = ReduceOp::sum;
  int64_t count = 0;          // elements: the all-reduce's, broadcast's, reduce-scatter's recv, all-gather's send
  int root = 0, peer = -1, tag = 0;
  const void* src = nullptr;  // device memory read
  void* dst = nullptr;        // device memory written
  uint8_t* stage = nullptr;   // pinned: what goes down and comes up
  uint8_t* stage_out = nullptr;  // pinned: a reduce-scatter's result
  std::vector<Piece> pieces;
  // Strict mode: this collective's signature, all-reduced (max) with its negation.
  int64_t signature[2] = {0, 0};
  Request check;
  bool check_pending = false;
  int64_t sequence = 0;       // the collective's number on its communicator
};

}  // namespace staged

}  // namespace tera
