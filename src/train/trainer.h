// A training run on any layout (tensor x pipeline x data parallel, ZeRO
// 0-3): the Engine's steps (train/engine.h: micro-batches, clipping, AdamW)
// under the learning-rate schedule (warmup + cosine), periodic validation,
// checkpoints (run_checkpoints.cpp: resume, ckpt.init, periodic and final
// saves) and stop signals. Step s consumes global samples [s*G, (s+1)*G)
// (G = train.global_batch); data-parallel rank r of d takes the contiguous
// slice [s*G + r*G/d, s*G + (r+1)*G/d), so losses depend only on (config,
// seed, step), whatever the layout (DESIGN.md invariant 1).
#pragma once

#include <functional>
#include <memory>
#include <optional>

#include "ckpt/checkpoint.h"
#include "comm/in_process_comm.h"
#include "comm/groups.h"
#include "core/status.h"
#include "data/training_data.h"
#include "kernels/backend.h"
#include "model/gpt.h"
#include "optim/lr_schedule.h"
#include "train/engine.h"
#include "train/run_lock.h"

namespace tera {

struct StepStats {
  int64_t step = 0;   // 1-based
  int64_t total = 0;
  double loss = 0;    // mean over the global batch's tokens
  float lr = 0;
  double grad_norm = 0;  // before clipping
  double seconds = 0;
  double tokens_per_s = 0;
  double gflops = 0;     // model FLOPs per second per rank (ModelSpec::train_flops_per_token)
  double comm_seconds = 0;  // time blocked in communication, max over ranks
  int64_t comm_bytes = 0;   // bytes sent (ring model, comm/communicator.h), max over ranks
  std::vector<double> bubble;  // per pipeline stage: seconds blocked in pipeline receives / step seconds
  std::optional<double> val_loss;
  double eval_seconds = 0;              // the evaluation after this step (0: none); not in `seconds`
  bool interrupted = false;             // a stop signal arrived during the step's evaluation
  bool skipped = false;                 // non-finite: no optimizer update (see StepResult)
  std::vector<std::string> bad_groups;  // the parameter groups with non-finite gradients
  bool update_nonfinite = false;        // skipped because the update would be non-finite (StepResult)
};

// Why Trainer::run returned.
enum class RunEnd {
  completed,  // train.steps done
  preempted,  // SIGTERM / SIGUSR1: checkpoint written, exit 0
  bad_steps,  // train.max_bad_steps consecutive non-finite steps: checkpoint of the last good state written
};

struct TrainerOptions {
  std::string trace_path;  // write a Chrome trace of the run there (empty: none)
  // Ranks of this job on this node: the memory each may allocate is the
  // node's available memory over this count. 0: no memory check.
  int ranks_on_node = 0;
  // Test hook passed to the Engine (EngineOptions::nonfinite_steps): the
  // 1-based steps whose embedding gradient is poisoned with a NaN.
  std::vector<int64_t> test_nonfinite_steps;
};

// How start() treats what is already in the checkpoint directory.
struct StartOptions {
  // "" (fresh run), "auto" (newest valid checkpoint under checkpoint_root();
  // none there: start fresh) or a checkpoint directory.
  std::string resume;
  // A fresh run into a checkpoint directory that holds checkpoints is
  // refused; with start_over they are deleted first.
  bool start_over = false;
  // A resumed run whose train.steps, lr, min_lr, warmup or optimizer
  // settings (weight_decay, beta1, beta2, eps, clip) differ from the
  // checkpoint's is refused; with change_schedule the change is printed and
  // the run follows the new settings.
  bool change_schedule = false;
  // A resumed run into a checkpoint root holding later checkpoints (or an
  // out.dir whose final is later) is refused; with discard_newer they are
  // deleted (train/run_outputs.h).
  bool discard_newer = false;
};

class Trainer {
 public:
  // Collective over `world`: every rank calls it. Bad input on any rank fails
  // every rank (the rank that saw it returns its message). Rank 0 locks
  // out.dir and ckpt.dir for the trainer's lifetime (train/run_lock.h).
  static Expected<std::unique_ptr<Trainer>> create(const RunConfig& cfg, const Backend& backend, Communicator& world,
                                                    const TrainerOptions& options = {});
  // One process, no launcher.
  static Expected<std::unique_ptr<Trainer>> create(const RunConfig& cfg, const Backend& backend);
  ~Trainer();

  // Runs steps [next, train.steps); on_step is called after each (all ranks).
  // Writes checkpoints every ckpt.every steps, after the last step (when
  // ckpt.dir is set), on preemption and when too many steps were bad.
  Status run(const std::function<void(const StepStats&)>& on_step);
  RunEnd end() const { return end_; }
  // Where checkpoints go (train/run_outputs.h checkpoint_root).
  std::string checkpoint_root() const;
  // Collective: writes <root>/step-<next step>; returns its directory.
  Expected<std::string> save_checkpoint();
  // Collective. Without a resumed checkpoint, ckpt.init (if set) provides
  // the weights.
  Status start(const StartOptions& options);
  Status start(const std::string& resume) { return start(StartOptions{.resume = resume}); }
  // Whether start() resumed a checkpoint (next_step() is its step).
  bool resumed() const { return resumed_; }
  int64_t next_step() const { return next_step_; }
  // Rank-0 messages (warnings, checkpoint lines); default: stderr.
  void set_log(std::function<void(const std::string&)> log) { log_ = std::move(log); }
  StepStats step();
  // Mean validation loss over train.eval_sequences windows (collective);
  // empty when a stop signal arrived during it (the run then checkpoints).
  std::optional<double> evaluate();
  // Writes out.dir/final (weights + config) from the first rank (collective).
  Status save_final();
  // Writes the Chrome trace if one was requested (collective).
  Status write_trace();
  // The pipeline bubble (p - 1) / (v m + p - 1) of this layout's schedule: p
  // stages, m micro-batches, v virtual chunks per stage.
  double theoretical_bubble() const;
  // Full parameters in ParamTable layout (collective under ZeRO-3).
  std::vector<float> gather_parameters();

  const RunConfig& config() const { return cfg_; }
  const ModelSpec& spec() const { return engine_->spec(); }
  const Groups& groups() const { return groups_->groups(); }
  // What carries the backend's tensors between ranks, in words (the start-up line).
  std::string device_comm() const { return groups_->device_comm_description(); }
  bool is_first_rank() const { return groups().rank == 0; }
  MemoryReport memory() const;  // this rank
  const Backend& backend() const { return be_; }
  const TokenDataset& train_data() const { return *data_.train; }  // not with data.blend (no single stream)
  const std::string& train_description() const { return data_.train_description; }
  const TokenDataset& val_data() const { return *data_.val; }

 private:
  Trainer(const RunConfig& cfg, const Backend& be) : cfg_(cfg), be_(be) {}
  RunConfig cfg_;
  const Backend& be_;
  std::unique_ptr<InProcessWorld> own_world_;
  std::unique_ptr<Communicator> own_comm_;
  TrainingData data_;
  std::unique_ptr<ProcessGroups> groups_;
  std::unique_ptr<Trace> trace_;
  std::string trace_path_;
  std::unique_ptr<Engine> engine_;
  LrSchedule schedule_;
  int64_t next_step_ = 0;
  RunEnd end_ = RunEnd::completed;
  std::function<void(const std::string&)> log_;
  std::vector<RunLock> locks_;  // rank 0: out.dir and ckpt.dir
  bool resumed_ = false;
  bool change_schedule_ = false;
  // The checkpoint a start() continues from: its directory ("" for a fresh
  // run) and step (-1 when none; for an explicit directory known on rank 0 only).
  struct ResumePoint {
    std::string dir;
    int64_t step = -1;
    bool automatic = false;  // --resume auto
  };
  void log(const std::string& msg) const;
  Status lock_outputs();  // rank 0: out.dir and ckpt.dir, probed and locked
  // Why this rank's memory plan does not fit its device (or its share of
  // the node's host memory); "" when it fits.
  std::string memory_refusal_of(const ParallelLayout& layout, int rank, int ranks_on_node) const;
  Status checkpoint_and_log();  // collective: save_checkpoint and its line
  Status check_start(const StartOptions& options);                 // collective
  Expected<ResumePoint> find_resume_point(const std::string& resume);  // collective
  Status claim_outputs(const ResumePoint& point, const StartOptions& options);  // collective
  Status claim_checkpoint_root(bool start_over);
  Status check_schedule(const CheckpointInfo& info, const std::string& dir);
  Status resume_from(const std::string& dir);
  Status init_weights_from(const std::string& path);
};

}  // namespace tera
