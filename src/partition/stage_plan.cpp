// Layer assignment to pipeline stages; see stage_plan.h.
#include "partition/stage_plan.h"

#include <fmt/format.h>

namespace tera {

bool StagePlan::has_embedding() const {
  for (const auto& c : chunks) {
    if (c.embedding) return true;
  }
  return false;
}

bool StagePlan::has_head() const {
  for (const auto& c : chunks) {
    if (c.head) return true;
  }
  return false;
}

bool StagePlan::has_layer(int64_t l) const {
  for (const auto& c : chunks) {
    if (l >= c.first_layer && l < c.first_layer + c.num_layers) return true;
  }
  return false;
}

int64_t StagePlan::num_layers() const {
  int64_t n = 0;
  for (const auto& c : chunks) n += c.num_layers;
  return n;
}

Expected<std::vector<int64_t>> layers_per_virtual_stage(int64_t layers, int pp, int vpp,
                                                        const std::vector<int64_t>& counts) {
  const int64_t V = int64_t{pp} * vpp;
  if (counts.empty()) {
    if (layers < V) {
      return Status::error(fmt::format(
          "model.layers = {} is fewer than the {} virtual pipeline stages (parallel.pp {} x parallel.vpp {}); every "
          "stage needs at least one layer: use fewer stages or set parallel.stage_layers",
          layers, V, pp, vpp));
    }
    std::vector<int64_t> out(static_cast<size_t>(V), layers / V);
    for (int64_t v = 0; v < layers % V; ++v) ++out[static_cast<size_t>(v)];
    return out;
  }
  if (static_cast<int64_t>(counts.size()) != V) {
    return Status::error(fmt::format(
        "parallel.stage_layers has {} entries but the pipeline has parallel.pp ({}) x parallel.vpp ({}) = {} virtual "
        "stages; give one layer count per virtual stage",
        counts.size(), pp, vpp, V));
  }
  int64_t sum = 0;
  for (int64_t v = 0; v < V; ++v) {
    const int64_t n = counts[static_cast<size_t>(v)];
    if (n < 0) return Status::error(fmt::format("parallel.stage_layers[{}] = {} must be >= 0", v, n));
    if (n == 0 && v != 0 && v != V - 1) {
      return Status::error(fmt::format(
          "parallel.stage_layers[{}] = 0: only the first and the last virtual stage (which hold the embedding and "
          "the head) may have no layers",
          v));
    }
    sum += n;
  }
  if (sum != layers) {
    return Status::error(
        fmt::format("parallel.stage_layers sums to {} but model.layers = {}; the counts must add up to the layers", sum, layers));
  }
  return counts;
}

StagePlan make_stage_plan(const std::vector<int64_t>& per_virtual, int pp, int stage) {
  const int V = static_cast<int>(per_virtual.size());
  StagePlan plan;
  plan.stage = stage;
  plan.stages = pp;
  int64_t first = 0;
  for (int v = 0; v < V; ++v) {
    if (v % pp == stage) {
      plan.chunks.push_back(ChunkPlan{v, first, per_virtual[static_cast<size_t>(v)], v == 0, v == V - 1});
    }
    first += per_virtual[static_cast<size_t>(v)];
  }
  return plan;
}

StagePlan whole_model_plan(int64_t layers) { return make_stage_plan({layers}, 1, 0); }

}  // namespace tera
