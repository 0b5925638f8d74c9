// Collective cost by alpha-beta with bus-bandwidth factors (nccl-tests
// PERFORMANCE.md): time = latency + factor * bytes / busbw, factor 2(n-1)/n
// for all-reduce, (n-1)/n for all-gather and reduce-scatter (bytes = the full
// buffer). busbw comes from a hierarchical topology: a group inside one
// package or node runs at that link's bandwidth; a group spanning nodes is
// bounded by its members' share of their node's NICs: k members per node
// drive k rail-aligned NICs' worth (k x nics x nic_bw / gpus; the node's other
// GPUs run their own groups beside it in a 3D layout), times an achievable
// fraction.
#pragma once

#include "plan/hardware.h"

namespace tera {

enum class Collective { all_reduce, all_gather, reduce_scatter };

// A process group of `size` ranks whose consecutive members are `stride`
// ranks apart (tp groups: stride 1; dp groups: stride tp; pp: stride tp*dp).
struct Group {
  int size = 1;
  int stride = 1;
};

double bus_factor(Collective c, int n);
// Members of the group on one node, and the number of nodes it spans.
int group_per_node(const Group& g, const Cluster& cl);
int group_nodes(const Group& g, const Cluster& cl);
// Achievable bus bandwidth of the group's slowest link (bytes/s).
double group_busbw(const Group& g, const Cluster& cl);

// Seconds for one collective over `bytes` (0 when the group has one rank).
double collective_time(Collective c, double bytes, const Group& g, const Cluster& cl);
// Seconds to move `bytes` between two ranks `distance` ranks apart.
double p2p_time(double bytes, int distance, const Cluster& cl);

}  // namespace tera
