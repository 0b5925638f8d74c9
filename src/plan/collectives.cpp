// Alpha-beta collectives on the node/NIC hierarchy. Latency: a ring inside the
// node (one alpha_intra per step) and a tree across nodes (alpha_inter per
// level, as NCCL's tree algorithm), twice for all-reduce; all-gather and
// reduce-scatter across nodes run as a ring, n - 1 steps of alpha_inter. Bandwidth
// is hierarchical: a group with k members per node moves its cross-node
// traffic over k rail-aligned NICs (k x the per-GPU share of the node's NICs).
#include "plan/collectives.h"

#include <algorithm>
#include <cmath>

namespace tera {

double bus_factor(Collective c, int n) {
  if (n <= 1) return 0;
  const double f = static_cast<double>(n - 1) / n;
  return c == Collective::all_reduce ? 2 * f : f;
}

int group_per_node(const Group& g, const Cluster& cl) {
  if (g.stride >= cl.node.gpus) return 1;
  return std::max(1, std::min(g.size, cl.node.gpus / g.stride));
}

int group_nodes(const Group& g, const Cluster& cl) {
  const int per = group_per_node(g, cl);
  return (g.size + per - 1) / per;
}

double group_busbw(const Group& g, const Cluster& cl) {
  const double intra = cl.node.intra_bw * cl.eff.intra_link;
  // Across nodes: rings are rail-aligned (NCCL runs one channel per NIC), so
  // the group's `per` members on a node drive `per` GPUs' shares of its NICs;
  // the node's other GPUs run their own groups on the rest at the same time.
  if (group_nodes(g, cl) > 1) {
    return std::min(intra, cl.node.inter_bw_per_gpu() * group_per_node(g, cl) * cl.eff.inter_link);
  }
  // Inside one node: the package link when all members share a package.
  if (static_cast<int64_t>(g.stride) * (g.size - 1) < cl.node.package_gpus) return cl.node.package_bw * cl.eff.intra_link;
  return intra;
}

double collective_time(Collective c, double bytes, const Group& g, const Cluster& cl) {
  if (g.size <= 1) return 0;
  const int per = group_per_node(g, cl), nodes = group_nodes(g, cl);
  const double levels = nodes > 1 ? std::ceil(std::log2(static_cast<double>(nodes))) : 0;
  double latency = (per - 1) * cl.eff.alpha_intra + levels * cl.eff.alpha_inter;
  if (c == Collective::all_reduce) {
    latency *= 2;
  } else if (nodes > 1) {
    // All-gather and reduce-scatter have no tree: a ring of n - 1 steps, each
    // as slow as its cross-node hop (what makes ZeRO-3 latency-bound at large dp).
    latency = (g.size - 1) * cl.eff.alpha_inter;
  }
  return latency + bus_factor(c, g.size) * bytes / group_busbw(g, cl);
}

double p2p_time(double bytes, int distance, const Cluster& cl) {
  const Group pair{2, distance};
  const bool cross_node = group_nodes(pair, cl) > 1;
  return (cross_node ? cl.eff.alpha_inter : cl.eff.alpha_intra) + bytes / group_busbw(pair, cl);
}

}  // namespace tera
