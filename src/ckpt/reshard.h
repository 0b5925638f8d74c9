// Offline resharding (`tera ckpt reshard`): a training checkpoint rewritten
// as the shard files another layout loads directly, one file per (pipeline
// stage, tensor rank) of the target, each tensor read whole from the source
// and scattered to the target's slices (ckpt/shard_map.h). The files depend
// on tp, pp and the layers of each virtual stage only; dp and zero are
// recorded, not applied (any dp reads the same files).
#pragma once

#include <string>

#include "ckpt/checkpoint.h"
#include "partition/parallel_layout.h"

namespace tera {

// Writes root/step-<source step> (staged, then committed as every checkpoint
// is) for `target`, which must have passed check_layout against the
// source's model. meta.json records the target's layout with the source's
// micro_batch (where the source recorded one) and the source's layout as
// "resharded_from". Returns the committed directory; after a failure to
// read the source or to write, no checkpoint is committed.
Expected<std::string> reshard_checkpoint(const CheckpointReader& source, const ParallelLayout& target,
                                         const std::string& root);

}  // namespace tera
