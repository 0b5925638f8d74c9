// What the trainer reads: the training and validation token streams and the
// sampler that maps a global sample index to a training window. The trainer
// calls open_training_data and never touches files itself, so the data
// pipeline can change formats without touching the training loop.
#pragma once

#include <memory>

#include "config/run_config.h"
#include "core/status.h"
#include "data/dataset.h"

namespace tera {

struct TrainingData {
  std::unique_ptr<TokenDataset> train, val;
  std::unique_ptr<RandomWindowSampler> sampler;  // over train
  std::string tokenizer = "bytes";                // recorded in checkpoints
};

// Opens data.train / data.val (or the held-out tail of data.train) and checks
// they fit model.seq_len and model.vocab; errors name the config key.
Expected<TrainingData> open_training_data(const RunConfig& cfg);

}  // namespace tera
