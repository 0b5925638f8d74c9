// Everything a training run is configured by, after parsing and validation
// (config/config.cpp turns a TOML file plus --set overrides into this).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/schedule_kind.h"
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
  Recompute recompute = Recompute::none;  // full: rerun each block's forward in backward
  std::string recompute_name_error;       // set by the parser for an unknown value
  int64_t eval_sequences = 32;  // validation windows per evaluation (the same set whatever the layout)
  int64_t max_bad_steps = 5;    // consecutive non-finite steps (skipped) before the run stops
  double comm_timeout_s = 600;  // a communication waiting longer ends the job (hung or stopped rank)
  AdamWConfig adamw;

  int64_t accumulation() const { return global_batch / micro_batch; }
};

struct DataConfig {
  std::string train;          // token-shard directory (tera tokenize encode) or text file
  std::string val;            // optional; when empty: the shards' val split, else the tail of train
  double val_fraction = 0.1;  // share of train held out when val is empty and there is no val split
  std::string tokenizer;      // tokenizer for a text train file (empty: bytes are tokens)
};

struct ParallelConfig {
  int tp = 1;    // tensor-parallel degree
  int pp = 1;    // pipeline-parallel degree
  int dp = 0;    // data-parallel degree; 0: world size / (tp * pp)
  int zero = 0;  // ZeRO stage 0-3 over the data-parallel group
  bool sequence_parallel = false;  // shard LayerNorm / residual regions along the sequence (needs seq_len % tp == 0)
  ScheduleKind schedule = ScheduleKind::one_f_one_b;  // gpipe | 1f1b | interleaved
  int vpp = 1;                                        // virtual chunks per stage (interleaved)
  std::vector<int64_t> stage_layers;                  // layers per virtual stage; empty: balanced
  std::string schedule_error;                         // set by the parser for an unknown name
};

struct OutConfig {
  std::string dir = "out";
};

// Checkpoints (ckpt/checkpoint.h): <dir>/step-<N>, every `every` steps (0:
// only at the end and on preemption), the newest `keep` retained. `init`: a
// checkpoint or tera-model directory, or a safetensors file (tera ckpt
// import / Hugging Face GPT-2 names), whose weights start a fresh run.
struct CkptConfig {
  std::string dir;  // empty: no checkpoints
  int64_t every = 0;
  int64_t keep = 3;
  std::string init;
};

struct RunConfig {
  ModelConfig model;
  TrainConfig train;
  DataConfig data;
  ParallelConfig parallel;
  OutConfig out;
  CkptConfig ckpt;
  std::string source;     // where it came from, for messages
  std::string mlp_error;  // set by the parser for an unknown model.mlp
};

}  // namespace tera
