// One rank's part of the model for a 3D layout: the GPT stage it runs (its
// pipeline stage's chunks, its tensor-parallel shard), its parameter memory
// (ZeRO 0-3 over the data-parallel group), the optimizer (AdamW over the
// shards ZeroMemory says this rank updates), the pipeline schedule and its
// executor, and the step protocol (run the schedule, reduce, clip by the
// global norm, AdamW). Batches come through a callback by global sample
// index, so the engine is independent of the data pipeline and
// unit-testable on a InProcessWorld. Its memory is the rank's memory plan
// (rank_plan.h), allocated once through the backend; the host sees the
// step's results through one copy of the device scalars per step.
#pragma once

#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "comm/groups.h"
#include "config/run_config.h"
#include "kernels/backend.h"
#include "model/gpt.h"
#include "optim/adamw.h"
#include "parallel/cp_comm.h"
#include "parallel/pipeline.h"
#include "parallel/tp_comm.h"
#include "parallel/trace.h"
#include "parallel/zero.h"
#include "partition/rank_plan.h"
#include "partition/schedule.h"
#include "train/rank_plan.h"

namespace tera {

// Fills tokens/targets [count, T] with global samples [first, first + count).
using BatchFn = std::function<void(int64_t first, int64_t count, int32_t* tokens, int32_t* targets)>;

// Evaluation control: stop() is asked between rounds of micro-batches
// (agreed over the world: any rank's yes stops every rank); progress() gets
// the sequences evaluated so far.
struct EvalControl {
  std::function<bool()> stop;
  std::function<void(int64_t done)> progress;
};

struct StepResult {
  double loss = 0;       // mean over the global batch's tokens (identical on every rank)
  double grad_norm = 0;  // global, before clipping
  // Non-finite loss or gradient: the optimizer step was skipped (parameters
  // and Adam state unchanged) and bad_groups names the parameter groups
  // ("wte", "io", "h.3") whose gradient was non-finite, on every rank.
  bool skipped = false;
  std::vector<std::string> bad_groups;
  // Skipped because the update itself would make parameters non-finite
  // (finite gradients, too large a learning rate); bad_groups then says so.
  bool update_nonfinite = false;
};

// Settings of an Engine that are not part of the run config.
struct EngineOptions {
  // Test hook (tests of the skip path, via tera train's hidden
  // --test-nonfinite-steps): at these 1-based steps world rank 0's embedding
  // gradient is poisoned with a NaN after the reduction.
  std::vector<int64_t> nonfinite_steps;
};

class Engine {
 public:
  // Collective over the groups (every rank builds its engine), which must
  // have been made with the backend's addressing. `trace` may be null.
  Engine(const RunConfig& cfg, const Backend& backend, const Groups& groups, Trace* trace = nullptr,
         EngineOptions options = {});
  ~Engine();

  void init_parameters(uint64_t seed) { zero_->init_parameters(seed); }
  // Step `step` (0-based) at learning rate lr over global samples [step*G, (step+1)*G).
  StepResult train_step(int64_t step, float lr, const BatchFn& batch);
  // Sum of per-token losses over evaluation samples [0, sequences) from
  // `batch`, in micro-batches of up to train.micro_batch; identical on every
  // rank. Empty when control.stop said so (on every rank).
  std::optional<double> eval_loss_sum(int64_t sequences, const BatchFn& batch, const EvalControl& control = {});
  std::vector<float> gather_parameters();  // this stage's, on the host; collective under ZeRO-3
  // This rank's tensor-parallel shard of parameters and both Adam moments in
  // the table's layout (checkpoints), host arrays: collective over the
  // data-parallel group. load_state takes the same layout; each rank keeps
  // its part.
  void gather_state(float* params, float* m, float* v);
  void load_state(const float* params, const float* m, const float* v);
  const Groups& groups() const { return g_; }
  const StagePlan& stage_plan() const { return rank_.stage; }
  // Whether this rank's stage holds the tied embedding only as the LM head's
  // copy (last stage of a pipeline): checkpoints and norms count stage 0's.
  bool holds_tied_copy() const {
    return spec_.config().tied() && g_.layout.pp > 1 && rank_.stage.has_head() && !rank_.stage.has_embedding();
  }

  const ModelSpec& spec() const { return spec_; }
  const ParamTable& table() const { return *table_; }
  const Schedule& schedule() const { return schedule_; }
  const ActivationOptions& activation_options() const { return rank_.act; }
  const RankPlan& rank_plan() const { return rank_; }
  // Of the last step: this stage's seconds blocked in pipeline receives, and the step's seconds.
  double bubble_seconds() const { return executor_->idle_seconds(); }
  double pipeline_seconds() const { return executor_->step_seconds(); }
  // Every parameter as its logical global tensor, assembled on world rank 0
  // (other ranks get an empty list). Collective.
  std::vector<std::pair<const ParamInfo*, std::vector<float>>> gather_global_parameters();
  // Bytes this rank allocated, per class (its memory plan's).
  MemoryReport memory() const;

 private:
  const RunConfig cfg_;
  const Backend& be_;
  const Groups& g_;
  const ModelSpec spec_;  // the table points into its parameter list
  RankPlan rank_;  // what this rank holds (train/rank_plan.h); everything below binds from it
  Schedule schedule_;
  std::unique_ptr<CommTensorParallel> tp_;
  std::unique_ptr<CommContextParallel> cp_;
  std::unique_ptr<ParamTable> table_;
  std::unique_ptr<RankMemory> memory_;  // before everything that points into it
  std::unique_ptr<ZeroMemory> zero_;
  std::unique_ptr<AdamW> adam_;  // over zero_->update_ranges()
  std::unique_ptr<Gpt> model_;
  std::unique_ptr<PipelineExecutor> executor_;
  std::vector<int64_t> poison_steps_;  // EngineOptions::nonfinite_steps
  std::vector<std::string> nonfinite_groups();  // collective over the world
  // batch's sequences [first, first + count), this rank's tokens of each
  // ([count, seq_len / cp]: its context-parallel chunks).
  void local_batch(const BatchFn& batch, int64_t first, int64_t count, int32_t* tokens, int32_t* targets);
  std::vector<int32_t> full_tokens_, full_targets_;  // whole sequences under cp > 1
  std::vector<AdamW::Span> adam_spans();        // adam_'s segments in zero_'s shards
  // The step scalars, device memory, indexed by memory_plan.h's StepScalars:
  // the loss sum, the two parts of the squared gradient norm, the
  // optimizer's non-finite count, then one non-finite gradient count per unit.
  double* scalars() const { return model_->step_scalars(); }
  std::vector<double> scalars_to_host(int64_t first, int64_t count) const;
};

}  // namespace tera
