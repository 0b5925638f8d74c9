// The process groups of one rank, made once from the world communicator and
// the ParallelLayout (partition/parallel_layout.h) with split(), and passed
// explicitly to every function that communicates (STYLE.md principle 7): no
// global communicators. Each group has two communicators (DESIGN.md
// invariant 6): the host one (tp, dp, pp, embedding: host scalars,
// checkpoint gathers) and the device one (tp_dev, ...: tensors in the
// backend's memory), chosen by the backend's DeviceAddressing
// (comm/device_comm.h); where the backend's memory is host memory the two
// are the same object.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "comm/communicator.h"
#include "comm/device_comm.h"
#include "core/device_memory.h"
#include "partition/parallel_layout.h"
#include "core/status.h"

namespace tera {

struct Groups {
  ParallelLayout layout;
  ParallelLayout::Coord coord;
  int rank = 0;                     // in the world
  Communicator* world = nullptr;
  Communicator* tp = nullptr;       // same (pp, dp, cp), tp ranks in order
  Communicator* dp = nullptr;       // same (pp, tp, cp)
  Communicator* pp = nullptr;       // same (tp, dp, cp), stages in order
  Communicator* embedding = nullptr;  // first + last stage of this (tp, dp, cp); null elsewhere or if pp == 1
  // Context parallelism: the cp ranks of one (pp, dp, tp), in cp order (the
  // ring attention's ring; a group of one at cp = 1).
  Communicator* cp = nullptr;
  // Every rank holding the same parameters: same (pp, tp), ordered dp * cp +
  // cp (the gradient reduction and ZeRO's shards; RankPlan::zero_group).
  // The dp group itself at cp = 1.
  Communicator* zero = nullptr;
  // The tp ranks holding the same key/value head when tp > kv_heads
  // (ModelSpec::kv_replicas), in tp order; a group of one otherwise.
  Communicator* kv = nullptr;
  // The same groups for tensors in device memory.
  Communicator* tp_dev = nullptr;
  Communicator* dp_dev = nullptr;
  Communicator* pp_dev = nullptr;
  Communicator* embedding_dev = nullptr;
  Communicator* kv_dev = nullptr;
  Communicator* cp_dev = nullptr;
  Communicator* zero_dev = nullptr;
};

// What the device communicators are made for: the backend's memory and
// the run's choice (train.device_comm, train.comm_timeout_s).
struct DeviceCommSetup {
  std::string backend = "cpu";  // its name, for messages
  DeviceAddressing addressing;
  DeviceCommOptions options;
};

class ProcessGroups {
 public:
  // Collective over `world` (every rank calls it with the same layout and
  // setup). Refused, before any group is made, when the backend's memory
  // needs a device communicator this build or machine cannot give: the
  // message names the backend, what is missing and the choices.
  // kv_replicas: tp ranks per key/value head (ModelSpec::kv_replicas(tp); 1
  // unless tp > kv_heads), dividing tp.
  static Expected<std::unique_ptr<ProcessGroups>> create(Communicator& world, const ParallelLayout& layout,
                                                         const DeviceCommSetup& setup, int kv_replicas = 1);
  // Host memory (the cpu backend): the device communicators are the host ones.
  ProcessGroups(Communicator& world, const ParallelLayout& layout, int kv_replicas = 1);
  const Groups& groups() const { return g_; }
  // What carries the device tensors of the groups of more than one rank, in
  // words ("device memory; collectives staged through host memory over MPI").
  std::string device_comm_description() const;
  // Device memory the device communicators' library will take beyond what
  // it holds already (device_comm_reserved_bytes per group of more than one
  // rank, and per pipeline route): kept aside by the memory check.
  int64_t device_comm_reserved_bytes() const;
  // Sum of the statistics of every group this rank belongs to.
  CommStats stats() const;
  void reset_stats();
  // Trace every wait on every group (null: stop).
  void set_trace(Trace* trace);

 private:
  ProcessGroups() = default;
  void make_host_groups(Communicator& world, const ParallelLayout& layout, int kv_replicas);
  Status make_device_groups();
  std::vector<Communicator*> owned() const;  // every group made here, host and device
  Groups g_;
  DeviceCommContext device_;
  std::unique_ptr<Communicator> tp_, dp_, pp_, embedding_, kv_, cp_, zero_;  // zero_: null at cp = 1 (dp serves)
  // Null where the host one serves.
  std::unique_ptr<Communicator> tp_dev_, dp_dev_, pp_dev_, embedding_dev_, kv_dev_, cp_dev_, zero_dev_;
};

}  // namespace tera
