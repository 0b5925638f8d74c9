// The workload a layout runs (model, global batch, precision) and the
// planner's view of the one layout type (core/parallel_layout.h) and its
// check (model/layout_check.h).
#pragma once

#include <string>

#include "core/parallel_layout.h"
#include "core/status.h"
#include "core/tensor.h"
#include "model/layout_check.h"
#include "model/model_spec.h"

namespace tera {

enum class Precision { fp32, mixed };
const char* precision_name(Precision p);
Expected<Precision> parse_precision(const std::string& s);

// Bytes per parameter of each training state. mixed is Megatron-LM's: 16-bit
// working weights and activations, gradients accumulated and reduced in fp32
// (main_grad), fp32 master weights and Adam moments.
struct PrecisionBytes {
  int64_t param = 4;
  int64_t grad = 4;
  int64_t master = 0;
  int64_t moments = 8;  // Adam m and v
  DType act = DType::f32;
};
PrecisionBytes precision_bytes(Precision p);
// Gradient bytes per parameter as kept and reduced: ZeRO-2/3 (DeepSpeed,
// FSDP) keep and reduce-scatter gradients in the 16-bit training dtype;
// ZeRO-0/1 (Megatron's DDP and distributed optimizer) accumulate and reduce fp32.
int64_t grad_bytes(const PrecisionBytes& pb, int zero);

struct Workload {
  ModelConfig model;          // model.seq_len is the training sequence length
  int64_t global_batch = 1;   // sequences per optimizer step
  Precision precision = Precision::mixed;
  // Linear layers in fp8 (torchao float8: dynamic scaling, casts before each
  // GEMM; attention, norms and master weights as in `precision`).
  bool fp8_gemms = false;
  // Separate input and output embeddings (Llama); ModelSpec's table ties them.
  bool untied_embeddings = false;
};

// ModelConfig has no tying flag: the gated-MLP family (Llama) unties its
// embeddings, GPT-2/3 shapes tie them.
inline bool untied_by_family(const ModelConfig& m) { return !m.tied(); }

// Micro-batches per pipeline per step: global_batch / (dp * micro_batch).
int64_t micro_batches(const ParallelLayout& l, const Workload& w);

// model/layout_check.h's check_layout for the workload's model and batch on
// `gpus` ranks (<= 0: any number).
Status check_layout(const ParallelLayout& l, const Workload& w, int gpus);

}  // namespace tera
