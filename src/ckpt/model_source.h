// Where a model's weights come from, the same for every subcommand (generate,
// eval, ckpt export/import/inspect/reshard) and for ckpt.init. A source is
//   checkpoint       a training checkpoint, ckpt.dir/step-N (ckpt/checkpoint.h)
//   checkpoint_root  a ckpt.dir: its newest valid step-N (invalid newer ones
//                    are skipped and named)
//   model_dir        a tera-model directory: out.dir/final, ckpt import's
//                    output (ckpt/model_checkpoint.h)
//   safetensors      a .safetensors file with Hugging Face GPT-2 or Llama names,
//                    or a model.safetensors.index.json and the shards it names
//                    (ckpt/safetensors_index.h),
//                    or tera names (its config from config.json beside it, or
//                    --heads for GPT-2; its
//                    tokenizer from vocab.json + merges.txt beside it, else bytes)
// resolve_model_source names the kind; ModelSourceReader opens it and reads
// global tensors by parameter, whatever layout wrote them.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "ckpt/checkpoint.h"
#include "ckpt/hf_gpt2.h"
#include "ckpt/safetensors.h"
#include "core/status.h"
#include "model/model_spec.h"
#include "partition/param_table.h"

namespace tera {

enum class ModelSourceKind { checkpoint, checkpoint_root, model_dir, safetensors };
const char* model_source_kind_name(ModelSourceKind k);  // "training checkpoint", "ckpt.dir", ...

struct ModelSource {
  ModelSourceKind kind = ModelSourceKind::checkpoint;
  std::string given;  // the path as the user wrote it
  std::string path;   // what is read: the step-N directory (for a ckpt.dir too), the model directory or the file
  std::vector<std::string> skipped;  // checkpoint_root: why newer step-N were not taken
  // Weights only (no optimizer state, no loader state): a model_dir or a safetensors file.
  bool weights_only() const { return kind == ModelSourceKind::model_dir || kind == ModelSourceKind::safetensors; }
};

// The kind of `path`; an error names the path and the kinds accepted. A
// directory with a meta.json is a checkpoint or a tera-model directory by its
// format; one without, a ckpt.dir when it holds step-N checkpoints.
Expected<ModelSource> resolve_model_source(const std::string& path);

struct ModelSourceOptions {
  int64_t heads = 0;                  // safetensors without config.json beside it
  const ModelConfig* model = nullptr;  // a safetensors file read as this model (ckpt.init: the run's), not inferred
  bool verify_crc = true;             // training checkpoints: check every file's CRC-32 on open
};

class ModelSourceReader {
 public:
  static Expected<ModelSourceReader> open(const ModelSource& source, const ModelSourceOptions& opt = {});

  const ModelSource& source() const { return source_; }
  const ModelConfig& model() const { return spec_->config(); }
  const ModelSpec& spec() const { return *spec_; }
  int64_t step() const { return step_; }
  // The tokenizer as a checkpoint records it ("bytes", its JSON, or a path
  // relative to tokenizer_base()); data/tokenizer_file.h tokenizer_from_reference
  // opens it. tokenizer_where() names the file that records it, for messages.
  const std::string& tokenizer() const { return tokenizer_; }
  const std::string& tokenizer_base() const { return tokenizer_base_; }
  const std::string& tokenizer_where() const { return tokenizer_where_; }
  // The training run's micro-batch when the source records it, else 0.
  int64_t micro_batch() const { return micro_batch_; }
  // The training checkpoint behind a checkpoint or checkpoint_root source.
  const CheckpointReader* checkpoint() const { return ckpt_ ? &*ckpt_ : nullptr; }
  // The tensor file behind a model_dir or safetensors source.
  const SafetensorsFile* file() const { return file_ ? &*file_ : nullptr; }

  // The global tensor of `param` (a parameter of a spec of model()) into
  // out[numel(param.shape)]; the error names the file and the tensor.
  Status read(const ParamInfo& param, float* out) const;
  // Every parameter, in ModelSpec order.
  Expected<std::vector<GlobalTensor>> read_all() const;
  // Every parameter of a one-rank table (tp = 1) into params; padding zeroed.
  Status read_into(const ParamTable& table, float* params) const;

 private:
  // open() by kind, filling this reader.
  Status open_checkpoint(const ModelSourceOptions& opt);
  Status open_model_dir();
  Status open_safetensors(const ModelSourceOptions& opt);
  ModelSourceReader() = default;
  ModelSource source_;
  std::unique_ptr<ModelSpec> spec_;
  int64_t step_ = 0;
  std::string tokenizer_ = "bytes", tokenizer_base_, tokenizer_where_;
  int64_t micro_batch_ = 0;
  std::optional<CheckpointReader> ckpt_;
  std::optional<SafetensorsFile> file_;
  bool hf_llama_ = false;  // a Hugging Face Llama file (ckpt/hf_llama.h)
};

}  // namespace tera
