// An in-process world of N simulated ranks (threads) implementing
// Communicator, so collectives, sharding and whole training steps can be
// unit-tested without mpirun. Collectives stage each rank's input, meet at a
// barrier, and reduce in rank order (deterministic); point-to-point messages
// are buffered per (source, destination, tag) and received in order.
#pragma once

#include <functional>
#include <memory>

#include "comm/communicator.h"

namespace tera {

class FakeWorld {
 public:
  explicit FakeWorld(int size);
  ~FakeWorld();
  int size() const;
  // The world communicator of `rank` (call once per rank, from its thread).
  std::unique_ptr<Communicator> communicator(int rank);

  // Runs f(world communicator) on `size` threads and joins them.
  static void run(int size, const std::function<void(Communicator&)>& f);

  struct Group;  // shared state of one (sub)group; defined in fake_comm.cpp

 private:
  std::shared_ptr<Group> group_;
};

}  // namespace tera
