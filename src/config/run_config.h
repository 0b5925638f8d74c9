// Everything a training run is configured by, after parsing and validation
// (config/config.cpp turns a TOML file plus --set overrides into this).
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "partition/parallel_layout.h"
#include "model/model_spec.h"
#include "optim/adamw_config.h"

namespace tera {

struct TrainConfig {
  int64_t steps = 100;
  int64_t global_batch = 4;  // sequences per optimizer step = micro_batch * accumulation * dp
  float lr = 3e-4f;
  float min_lr = 3e-5f;
  int64_t warmup = 0;
  float clip = 1.0f;  // global grad-norm clip; 0 disables
  uint64_t seed = 1234;
  int64_t eval_every = 0;    // 0: only at the end
  int64_t eval_sequences = 32;  // validation windows per evaluation (the same set whatever the layout)
  int64_t max_bad_steps = 5;    // consecutive non-finite steps (skipped) before the run stops
  double comm_timeout_s = 600;  // a communication waiting longer ends the job (hung or stopped rank)
  // The kernel backend by name (kernels/backend.h: find_backend); whether
  // this binary has it is checked when the run starts (tera train).
  std::string backend = "cpu";
  // What carries the tensors of a device backend between ranks
  // (comm/device_comm.h): "auto" (the vendor library where built, else
  // GPU-aware MPI where the MPI library takes device pointers, else staged
  // through host memory), "nccl", "rccl", "mpi" or "staged".
  std::string device_comm = "auto";
  // "fp32", or "bf16": the linear layers' GEMMs take bf16 inputs (weights
  // rounded after each update, activations just before each product) and
  // accumulate in fp32; master weights, optimizer state, activations,
  // gradients and every reduction stay fp32 (docs/precision.md).
  DType precision = DType::f32;
  AdamWConfig adamw;
};

struct DataConfig {
  std::string train;          // token-shard directory (tera tokenize encode) or text file
  std::string val;            // optional; when empty: the shards' val split, else the tail of train
  double val_fraction = 0.1;  // share of train held out when val is empty and there is no val split
  std::string tokenizer;      // tokenizer for a text train file (empty: bytes are tokens)
  std::string tokenizer_pattern;   // a tiktoken rank file's pre-tokenizer (gpt2, cl100k, qwen2)
  std::string tokenizer_specials;  // a tiktoken rank file's special tokens, "TEXT=ID,TEXT=ID"
  // Megatron's --data-path 0.3 A 0.7 B: [weight, prefix] pairs, weights > 0
  // (normalised); set instead of train (data/blend_loader.h).
  std::vector<std::pair<double, std::string>> blend;
};

// The run's layout (partition/parallel_layout.h) as the config sets it: the
// [parallel] keys, and train.micro_batch and train.recompute (which the
// config file keeps under [train]); dp = 0 (the default) is derived from the
// world size. The runtime recomputes none or full blocks.
inline ParallelLayout default_run_layout() {
  ParallelLayout l;
  l.dp = 0;
  l.micro_batch = 4;
  return l;
}

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
  ParallelLayout parallel = default_run_layout();
  OutConfig out;
  CkptConfig ckpt;
  std::string source;     // where it came from, for messages
  // Set by the parser for a value no enum has (reported by validation).
  std::string mlp_error;             // model.mlp
  std::string attention_error;       // model.attention
  std::string arch_error;            // model.arch
  std::string rope_scaling_error;    // model.rope_scaling
  std::string recompute_name_error;  // train.recompute
  std::string precision_error;       // train.precision
  std::string schedule_error;        // parallel.schedule
  std::string range_error;           // an integer key out of its type's range

  // Micro-batches of a step, over all data-parallel ranks: global_batch / micro_batch.
  int64_t accumulation() const { return train.global_batch / parallel.micro_batch; }
};

}  // namespace tera
