// ContextParallel (model/context_parallel.h) over a Communicator: the
// context-parallel group of a Groups (comm/groups.h). Each shift is an
// irecv from the previous rank and an isend to the next under its stream's
// tag; the constructor opens those routes (collective over the group).
#pragma once

#include <vector>

#include "comm/communicator.h"
#include "model/context_parallel.h"

namespace tera {

class CommContextParallel final : public ContextParallel {
 public:
  explicit CommContextParallel(Communicator& cp);
  int size() const override { return c_.size(); }
  int rank() const override { return c_.rank(); }
  void start_shift(Stream stream, const float* send, float* recv, int64_t count) override;
  void finish_shift(Stream stream) override;

 private:
  static int tag(Stream s) { return 71 + static_cast<int>(s); }
  Communicator& c_;
  std::vector<Request> pending_[2];
};

}  // namespace tera
