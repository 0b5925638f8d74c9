// The process groups of one rank, made once from the world communicator and
// the ParallelLayout (core/parallel_layout.h) with split(), and passed
// explicitly to every function that communicates (STYLE.md principle 7): no
// global communicators. Each group has two communicators (DESIGN.md
// invariant 6): the host one (tp, dp, pp, embedding: host scalars,
// checkpoint gathers) and the device one (tp_dev, ...: tensors in the
// backend's memory), chosen by the backend's DeviceAddressing
// (comm/device_comm.h); where the backend's memory is host memory the two
// are the same object.
#pragma once

#include <memory>

#include "comm/communicator.h"
#include "core/device_memory.h"
#include "core/parallel_layout.h"

namespace tera {

struct Groups {
  ParallelLayout layout;
  ParallelLayout::Coord coord;
  int rank = 0;                     // in the world
  Communicator* world = nullptr;
  Communicator* tp = nullptr;       // same (pp, dp), tp ranks in order
  Communicator* dp = nullptr;       // same (pp, tp)
  Communicator* pp = nullptr;       // same (tp, dp), stages in order
  Communicator* embedding = nullptr;  // first + last stage of this (tp, dp); null elsewhere or if pp == 1
  // The same groups for tensors in device memory.
  Communicator* tp_dev = nullptr;
  Communicator* dp_dev = nullptr;
  Communicator* pp_dev = nullptr;
  Communicator* embedding_dev = nullptr;
};

class ProcessGroups {
 public:
  // Collective over `world` (every rank calls it with the same layout).
  // Aborts when `addressing` needs a device communicator this build lacks
  // (the trainer checks that first: device_communicator_error).
  ProcessGroups(Communicator& world, const ParallelLayout& layout, const DeviceAddressing& addressing = {});
  const Groups& groups() const { return g_; }
  // Sum of the statistics of every group this rank belongs to.
  CommStats stats() const;
  void reset_stats();
  // Trace every wait on every group (null: stop).
  void set_trace(Trace* trace);

 private:
  Groups g_;
  std::unique_ptr<Communicator> tp_, dp_, pp_, embedding_;
  std::unique_ptr<Communicator> tp_dev_, dp_dev_, pp_dev_, embedding_dev_;  // null where the host one serves
};

}  // namespace tera
