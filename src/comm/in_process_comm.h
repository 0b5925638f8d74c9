// An in-process world of N ranks (threads) implementing Communicator. It is
// the world of a one-process run (CommWorld::init without a launcher,
// Trainer::create without a communicator) and, with N > 1, lets collectives,
// sharding and whole training steps be tested without mpirun. Collectives stage each rank's input, meet at a
// barrier, and reduce in rank order (deterministic); point-to-point messages
// are buffered per (source, destination, tag) and received in order.
#pragma once

#include <functional>
#include <memory>

#include "comm/communicator.h"

namespace tera {

class InProcessWorld {
 public:
  explicit InProcessWorld(int size);
  ~InProcessWorld();
  int size() const;
  // The world communicator of `rank` (call once per rank, from its thread).
  std::unique_ptr<Communicator> communicator(int rank);

  // Runs f(world communicator) on `size` threads and joins them.
  static void run(int size, const std::function<void(Communicator&)>& f);

  struct Group;  // shared state of one (sub)group; defined in in_process_comm.cpp

 private:
  std::shared_ptr<Group> group_;
};

}  // namespace tera
