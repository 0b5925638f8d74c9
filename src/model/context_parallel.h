// The context-parallel group as ring attention (model/ring_attention.h)
// uses it: cp ranks in a ring, each shifting buffers to the next. Two
// streams of shifts may be in flight at once (backward moves the K/V blocks
// and, separately, their gradients). Implementation: parallel/cp_comm.h
// over the group's device communicator; the buffers are device memory.
#pragma once

#include <cstdint>

namespace tera {

class ContextParallel {
 public:
  enum Stream { blocks = 0, block_grads = 1 };
  virtual ~ContextParallel() = default;
  virtual int size() const = 0;
  virtual int rank() const = 0;
  // Posts one shift on `stream`: send[count] to rank + 1 and recv[count]
  // from rank - 1 (mod size). send is read and recv written until finish_shift.
  virtual void start_shift(Stream stream, const float* send, float* recv, int64_t count) = 0;
  // Waits for every shift posted on `stream`.
  virtual void finish_shift(Stream stream) = 0;
};

// cp = 1: every sequence on one rank; nothing is ever shifted.
class SingleRankContextParallel final : public ContextParallel {
 public:
  int size() const override { return 1; }
  int rank() const override { return 0; }
  void start_shift(Stream, const float*, float*, int64_t) override { unreachable(); }
  void finish_shift(Stream) override {}

 private:
  [[noreturn]] static void unreachable();
};

}  // namespace tera
