// A model checkpoint directory: meta.json (format, version, model config,
// step, the CRC-32 of the tensor file) and model.safetensors (every parameter
// as its logical global tensor, by name; vocab padding is never saved).
// The directory is written under a temporary name and renamed into place, so
// a crash leaves the previous checkpoint intact. The full distributed format
// (optimizer state, resharding, resume) builds on this one.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include <nlohmann/json.hpp>

#include "core/status.h"
#include "model/model_spec.h"
#include "partition/param_table.h"

namespace tera {

inline constexpr const char* kModelCheckpointFormat = "tera-model";
inline constexpr int kModelCheckpointVersion = 1;

struct CheckpointMeta {
  ModelConfig model;
  int64_t step = 0;
  std::string tokenizer = "bytes";  // "bytes" or a tokenizer file
  nlohmann::json extra = nlohmann::json::object();  // run config, metrics summary
  std::optional<uint32_t> tensors_crc32 = std::nullopt;  // read back: the tensor file's recorded CRC-32
};

nlohmann::json model_config_to_json(const ModelConfig& m);
Expected<ModelConfig> model_config_from_json(const nlohmann::json& j, const std::string& what);
// Llama 3.1's rope_scaling object as Hugging Face's config.json and tera's
// meta.json spell it: {rope_type: "llama3", factor, low_freq_factor,
// high_freq_factor, original_max_position_embeddings} (the older key "type"
// is accepted for rope_type). Another rope_type is refused by name; the
// values are checked by validate_model_config. `what` names the field.
Expected<ModelConfig::RopeScaling> rope_scaling_from_json(const nlohmann::json& j, const std::string& what);
nlohmann::json rope_scaling_to_json(const ModelConfig::RopeScaling& s);  // null when off

// A logical global tensor to save.
struct NamedTensor {
  std::string name;
  Shape shape;
  const float* data;
};

Status save_model_checkpoint(const std::string& dir, const std::vector<NamedTensor>& tensors,
                             const CheckpointMeta& meta);
// Every parameter of a one-rank table (tp = 1, resident).
Status save_model_checkpoint(const std::string& dir, const ParamTable& table, const float* params,
                             const CheckpointMeta& meta);
Expected<CheckpointMeta> read_checkpoint_meta(const std::string& dir);
// Loads every parameter of `table` from dir (checksum, names and shapes checked).
Status load_model_weights(const std::string& dir, const ParamTable& table, float* params);

}  // namespace tera
