// The process groups of one rank, made once from the world communicator and
// the ParallelLayout (comm/layout.h) with split(), and passed explicitly to every
// function that communicates (STYLE.md principle 7): no global communicators.
#pragma once

#include <memory>

#include "comm/communicator.h"
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
};

class ProcessGroups {
 public:
  // Collective over `world` (every rank calls it with the same layout).
  ProcessGroups(Communicator& world, const ParallelLayout& layout);
  const Groups& groups() const { return g_; }
  // Sum of the statistics of every group this rank belongs to.
  CommStats stats() const;
  void reset_stats();
  // Trace every wait on every group (null: stop).
  void set_trace(Trace* trace);

 private:
  Groups g_;
  std::unique_ptr<Communicator> tp_, dp_, pp_, embedding_;
};

}  // namespace tera
