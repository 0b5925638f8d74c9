// Everything a training run is configured by, after parsing and validation
// (config/config.cpp turns a TOML file plus --set overrides into this).
#pragma once

#include <cstdint>
#include <string>

#include "model/model_spec.h"
#include "optim/adamw_config.h"

namespace tera {

struct TrainConfig {
  int64_t steps = 100;
  int64_t micro_batch = 4;
  int64_t global_batch = 4;  // sequences per optimizer step = micro_batch * accumulation
  float lr = 3e-4f;
  float min_lr = 3e-5f;
  int64_t warmup = 0;
  float clip = 1.0f;  // global grad-norm clip; 0 disables
  uint64_t seed = 1234;
  int64_t eval_every = 0;    // 0: only at the end
  int64_t eval_batches = 8;  // micro-batches of validation data per evaluation
  AdamWConfig adamw;

  int64_t accumulation() const { return global_batch / micro_batch; }
};

struct DataConfig {
  std::string train;          // text file (bytes are tokens)
  std::string val;            // optional; when empty the tail of train is held out
  double val_fraction = 0.1;  // share of train held out when val is empty
};

struct OutConfig {
  std::string dir = "out";
};

struct RunConfig {
  ModelConfig model;
  TrainConfig train;
  DataConfig data;
  OutConfig out;
  std::string source;  // where it came from, for messages
};

}  // namespace tera
