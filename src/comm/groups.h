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
#include <vector>

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
  // The tp ranks holding the same key/value head when tp > kv_heads
  // (ModelSpec::kv_replicas), in tp order; a group of one otherwise.
  Communicator* kv = nullptr;
  // The same groups for tensors in device memory.
  Communicator* tp_dev = nullptr;
  Communicator* dp_dev = nullptr;
  Communicator* pp_dev = nullptr;
  Communicator* embedding_dev = nullptr;
  Communicator* kv_dev = nullptr;
};

class ProcessGroups {
 public:
  // Collective over `world` (every rank calls it with the same layout).
  // Aborts when `addressing` needs a device communicator this build lacks
  // (the trainer checks that first: device_communicator_error).
  // kv_replicas: tp ranks per key/value head (ModelSpec::kv_replicas(tp); 1
  // unless tp > kv_heads), dividing tp.
  ProcessGroups(Communicator& world, const ParallelLayout& layout, const DeviceAddressing& addressing = {},
                int kv_replicas = 1);
  const Groups& groups() const { return g_; }
  // Sum of the statistics of every group this rank belongs to.
  CommStats stats() const;
  void reset_stats();
  // Trace every wait on every group (null: stop).
  void set_trace(Trace* trace);

 private:
  std::vector<Communicator*> owned() const;  // every group made here, host and device
  Groups g_;
  std::unique_ptr<Communicator> tp_, dp_, pp_, embedding_, kv_;
  std::unique_ptr<Communicator> tp_dev_, dp_dev_, pp_dev_, embedding_dev_, kv_dev_;  // null where the host one serves
};

}  // namespace tera
