// The single-process training loop: gradient accumulation over micro-batches,
// global-norm clipping, AdamW with warmup + cosine LR, periodic validation.
// Step s consumes global samples [s*G, (s+1)*G) (G = train.global_batch), so
// the losses depend only on (config, seed, step).
#pragma once

#include <functional>
#include <memory>
#include <optional>

#include "core/status.h"
#include "data/training_data.h"
#include "kernels/backend.h"
#include "model/gpt.h"
#include "optim/adamw.h"
#include "optim/lr_schedule.h"
#include "config/run_config.h"

namespace tera {

struct StepStats {
  int64_t step = 0;   // 1-based
  int64_t total = 0;
  double loss = 0;    // mean over the global batch's tokens
  float lr = 0;
  double grad_norm = 0;  // before clipping
  double seconds = 0;
  double tokens_per_s = 0;
  double gflops = 0;  // model FLOPs (ModelSpec::train_flops_per_token) per second
  std::optional<double> val_loss;
};

class Trainer {
 public:
  static Expected<std::unique_ptr<Trainer>> create(const RunConfig& cfg, const Backend& backend);

  // Runs steps [next, train.steps); on_step is called after each.
  Status run(const std::function<void(const StepStats&)>& on_step);
  // Runs one step (the next one) and returns its stats.
  StepStats step();
  // Mean validation loss over train.eval_batches micro-batches.
  double evaluate();
  // Writes out.dir/final (weights + config).
  Status save_final() const;

  Gpt& model() { return *model_; }
  const RunConfig& config() const { return cfg_; }
  MemoryReport memory() const;
  const TokenDataset& train_data() const { return *data_.train; }
  const TokenDataset& val_data() const { return *data_.val; }

 private:
  Trainer(const RunConfig& cfg, const Backend& be) : cfg_(cfg), be_(be) {}
  RunConfig cfg_;
  const Backend& be_;
  TrainingData data_;
  std::unique_ptr<Gpt> model_;
  std::unique_ptr<AdamW> opt_;
  LrSchedule schedule_;
  std::vector<int32_t> tokens_, targets_;
  int64_t next_step_ = 0;
};

}  // namespace tera
