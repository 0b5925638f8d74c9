// Saving and loading an Engine's state as a training checkpoint
// (ckpt/checkpoint.h): every (pipeline stage, tensor rank) group's first
// data-parallel rank writes its shard file after gathering the stage's ZeRO
// shards; any layout loads any other's checkpoint by reading global tensors
// and keeping its own slice of each.
#pragma once

#include <string>

#include "ckpt/checkpoint.h"
#include "train/engine.h"

namespace tera {

// Collective over the engine's world. `info` carries everything but the file
// list; rank 0 commits the directory. Returns the checkpoint directory (on
// every rank) or the first failure (on every rank).
Expected<std::string> save_engine_checkpoint(Engine& engine, CheckpointInfo info, const std::string& root, int64_t keep);

// Not collective (each rank reads what it needs; files are memory-mapped).
// The model must match the checkpoint's (checked by the caller:
// model_config_diff). Without the optimizer state (or with
// with_optimizer = false, e.g. fine-tuning from ckpt.init) the Adam moments
// start at zero.
Status load_engine_checkpoint(Engine& engine, const CheckpointReader& reader, bool with_optimizer);

// Weights only, from a map name -> global tensor (tera-model directories and
// imported safetensors files).
using GlobalTensorFn = std::function<Status(const ParamInfo& param, float* out)>;
Status load_engine_weights(Engine& engine, const GlobalTensorFn& read);

}  // namespace tera
