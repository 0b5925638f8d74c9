// One rank's part of the model for a 3D layout: the GPT stage it runs (its
// pipeline stage's chunks, its tensor-parallel shard), its parameter memory
// (ZeRO 0-3 over the data-parallel group), the pipeline schedule and its
// executor, and the step protocol (run the schedule, reduce, clip by the
// global norm, AdamW). Batches come through a callback by global sample
// index, so the engine is independent of the data pipeline and
// unit-testable on a FakeWorld.
#pragma once

#include <functional>
#include <memory>
#include <vector>

#include "comm/groups.h"
#include "config/run_config.h"
#include "kernels/backend.h"
#include "model/gpt.h"
#include "parallel/pipeline.h"
#include "parallel/schedule.h"
#include "parallel/tp_comm.h"
#include "parallel/trace.h"
#include "parallel/zero.h"

namespace tera {

// Fills tokens/targets [count, T] with global samples [first, first + count).
using BatchFn = std::function<void(int64_t first, int64_t count, int32_t* tokens, int32_t* targets)>;

struct StepResult {
  double loss = 0;       // mean over the global batch's tokens (identical on every rank)
  double grad_norm = 0;  // global, before clipping
};

class Engine {
 public:
  // Collective over the groups (every rank builds its engine). `trace` may be null.
  Engine(const RunConfig& cfg, const Backend& backend, const Groups& groups, Trace* trace = nullptr);

  void init_parameters(uint64_t seed) { zero_->init_parameters(seed); }
  // Step `step` (0-based) at learning rate lr over global samples [step*G, (step+1)*G).
  StepResult train_step(int64_t step, float lr, const BatchFn& batch);
  // Sum of per-token losses over evaluation samples [0, sequences) from
  // `batch`, in micro-batches of up to train.micro_batch; identical on every rank.
  double eval_loss_sum(int64_t sequences, const BatchFn& batch);
  std::vector<float> gather_parameters();  // this stage's, collective under ZeRO-3

  const ModelSpec& spec() const { return spec_; }
  const ParamTable& table() const { return *table_; }
  const Schedule& schedule() const { return schedule_; }
  const ActivationOptions& activation_options() const { return model_->activation_options(); }
  // Of the last step: this stage's seconds blocked in pipeline receives, and the step's seconds.
  double bubble_seconds() const { return executor_->idle_seconds(); }
  double pipeline_seconds() const { return executor_->step_seconds(); }
  // Every parameter as its logical global tensor, assembled on world rank 0
  // (other ranks get an empty list). Collective.
  std::vector<std::pair<const ParamInfo*, std::vector<float>>> gather_global_parameters();
  MemoryReport memory() const;

 private:
  const RunConfig cfg_;
  const Backend& be_;
  const Groups& g_;
  const ModelSpec spec_;  // the table points into its parameter list
  Schedule schedule_;
  StagePlan plan_;
  std::unique_ptr<CommTensorParallel> tp_;
  std::unique_ptr<ParamTable> table_;
  std::unique_ptr<ZeroMemory> zero_;
  std::unique_ptr<Gpt> model_;
  std::unique_ptr<PipelineExecutor> executor_;
  int64_t micro_batches_ = 1;  // per data-parallel rank per step
};

// The stage plan of `stage` under cfg (balanced, or parallel.stage_layers).
Expected<StagePlan> stage_plan_for(const RunConfig& cfg, int stage);

}  // namespace tera
