// Alpha-beta collectives on the node/NIC hierarchy. Latency: a ring inside the
// node (one alpha_intra per step) and a tree across nodes (alpha_inter per
// level, as NCCL's tree and PAT algorithms), twice for all-reduce.
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
  if (group_nodes(g, cl) > 1) return std::min(intra, cl.node.inter_bw_per_gpu() * cl.eff.inter_link);
  // Inside one node: the package link when all members share a package.
  if (static_cast<int64_t>(g.stride) * (g.size - 1) < cl.node.package_gpus) return cl.node.package_bw * cl.eff.intra_link;
  return intra;
}

double collective_time(Collective c, double bytes, const Group& g, const Cluster& cl) {
  if (g.size <= 1) return 0;
  const int per = group_per_node(g, cl), nodes = group_nodes(g, cl);
  const double levels = nodes > 1 ? std::ceil(std::log2(static_cast<double>(nodes))) : 0;
  double latency = (per - 1) * cl.eff.alpha_intra + levels * cl.eff.alpha_inter;
  if (c == Collective::all_reduce) latency *= 2;
  return latency + bus_factor(c, g.size) * bytes / group_busbw(g, cl);
}

double p2p_time(double bytes, int distance, const Cluster& cl) {
  const Group pair{2, distance};
  const bool cross_node = group_nodes(pair, cl) > 1;
  return (cross_node ? cl.eff.alpha_inter : cl.eff.alpha_intra) + bytes / group_busbw(pair, cl);
}

}  // namespace tera
