// What the trainer reads: the training and validation token streams and the
// loader that maps a global sample index to a training window. The trainer
// calls open_training_data and never touches files itself, so the data
// pipeline can change formats without touching the training loop.
// data.train (and data.val) is a token-shard directory (tera tokenize
// encode), a Megatron .bin/.idx prefix (megatron_dataset.h), or a text file:
// its bytes are the tokens, or, with data.tokenizer, it is encoded in memory
// at startup. data.blend instead of data.train: a weighted blend of Megatron
// prefixes (blend_loader.h).
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "core/status.h"
#include "data/bpe_tokenizer.h"
#include "data/dataset.h"
#include "data/token_loader.h"

namespace tera {

struct TrainingData {
  std::unique_ptr<TokenDataset> train, val;  // train: null for data.blend (the sampler owns its datasets)
  std::unique_ptr<SampleLoader> sampler;  // over train (or the blend of data.blend)
  // Recorded in checkpoints (CheckpointMeta::tokenizer): "bytes", or the
  // tokenizer file's text (see tokenizer_reference in tokenizer_file.h).
  std::string tokenizer = "bytes";
  std::string train_description;  // for logs: train->describe(), or the blend's sources and shares
};

// What open_training_data reads from a run's config (train/ fills it from
// RunConfig; data/ does not know the config bundle). Errors name the config
// keys in the comments, so the fields keep their meaning there.
struct TrainingDataOptions {
  std::string train;          // data.train: token-shard directory or text file
  std::string val;            // data.val; empty: the shards' val split, else the tail of train
  double val_fraction = 0.1;  // data.val_fraction
  std::string tokenizer;      // data.tokenizer; empty: bytes are tokens (text files)
  std::string tokenizer_pattern, tokenizer_specials;  // data.tokenizer_pattern, data.tokenizer_specials (tiktoken files)
  // data.blend: [weight, Megatron prefix] pairs, set instead of train (needs val).
  std::vector<std::pair<double, std::string>> blend;
  int64_t seq_len = 0;        // model.seq_len: tokens per training window
  int64_t vocab = 0;          // model.vocab: must cover the data's vocabulary
  uint64_t seed = 0;          // train.seed: the loader's sample order
  std::string source;         // the config file, named in errors
};

// Opens the run's data and checks it fits model.seq_len and model.vocab;
// errors name the config key, the file and the fix.
Expected<TrainingData> open_training_data(const TrainingDataOptions& o);

// Evaluation data for a tokenizer: a shard directory (its val split if it has
// one, else its train split; written with the same tokenizer) or a text file
// (byte tokens, or encoded in memory). `key` names the source in errors.
Expected<std::unique_ptr<TokenDataset>> open_eval_data(const std::string& path, const BpeTokenizer& tok,
                                                       const std::string& key);

}  // namespace tera
