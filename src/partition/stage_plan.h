// Which part of the model a pipeline stage runs. The L blocks split into
// V = pp * vpp virtual stages; virtual stage v = chunk * pp + stage (Megatron's
// interleaved assignment, partition/schedule.h) holds a contiguous run of
// layers. The embedding belongs to virtual stage 0, the final LayerNorm and
// the (tied) LM head to virtual stage V - 1. Balanced by default: each
// virtual stage gets L / V layers and the first L % V one more; an explicit
// parallel.stage_layers list overrides it.
#pragma once

#include <cstdint>
#include <vector>

#include "core/status.h"

namespace tera {

struct ChunkPlan {
  int virtual_stage = 0;
  int64_t first_layer = 0, num_layers = 0;
  bool embedding = false, head = false;
};

struct StagePlan {
  int stage = 0, stages = 1;
  std::vector<ChunkPlan> chunks;  // in chunk order
  bool has_embedding() const;
  bool has_head() const;
  bool has_layer(int64_t l) const;
  int64_t num_layers() const;
};

// Layers per virtual stage (size pp * vpp). `counts` empty means balanced;
// otherwise it must have pp * vpp entries summing to `layers`, every virtual
// stage without the embedding or the head holding at least one layer.
Expected<std::vector<int64_t>> layers_per_virtual_stage(int64_t layers, int pp, int vpp,
                                                        const std::vector<int64_t>& counts = {});
StagePlan make_stage_plan(const std::vector<int64_t>& per_virtual_stage, int pp, int stage);
// The whole model as one stage (no pipeline).
StagePlan whole_model_plan(int64_t layers);

}  // namespace tera
