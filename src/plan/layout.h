// The workload a layout runs (model, global batch, precision) and the
// planner's view of the one layout type (partition/parallel_layout.h) and its
// check (partition/layout_check.h).
#pragma once

#include <string>

#include "partition/parallel_layout.h"
#include "core/status.h"
#include "core/tensor.h"
#include "partition/layout_check.h"
#include "model/model_spec.h"

namespace tera {

// The training precision, in the runtime's vocabulary (train.precision):
//   fp32  everything in fp32;
//   bf16  tera's bf16 (docs/precision.md): GEMMs on bf16 inputs, fp32 residual
//         stream, parameters, gradients and Adam moments; a bf16 copy of the
//         weights and bf16 cast buffers, kept activations bf16 where the
//         runtime's memory plan says. On a stack with activations_16bit
//         (hardware.h: Megatron-LM, DeepSpeed, torchtitan, llm.c) it is their
//         mixed precision instead: every activation and the working weights
//         in 16 bits, fp32 master weights.
// parse_precision reads "mixed" and "fp16" as bf16 (16-bit GEMMs).
enum class Precision { fp32, bf16 };
const char* precision_name(Precision p);
Expected<Precision> parse_precision(const std::string& s);
// The --precision help text of the commands that price a run.
inline constexpr const char* kPrecisionHelp =
    "bf16 (tera's bf16; Megatron-style mixed precision on a stack with activations_16bit) or fp32";

struct Stack;
// Bytes per parameter of each training state. The 16-bit stacks' mixed
// precision is Megatron-LM's: 16-bit working weights and activations,
// gradients accumulated and reduced in fp32 (main_grad), fp32 master weights
// and Adam moments. tera's bf16 keeps fp32 parameters (they are the master)
// and prices its bf16 weight copies and cast buffers in the memory plan.
struct PrecisionBytes {
  int64_t param = 4;
  int64_t grad = 4;
  int64_t master = 0;
  int64_t moments = 8;  // Adam m and v
  DType act = DType::f32;
};
PrecisionBytes precision_bytes(Precision p, const Stack& stack);
// The dtype of the runtime's GEMM inputs (ActivationOptions::gemm): bf16 for
// tera's bf16, fp32 otherwise (a 16-bit stack's activations already are).
DType gemm_input_dtype(Precision p, const Stack& stack);
// Gradient bytes per parameter as kept and reduced: ZeRO-2/3 (DeepSpeed,
// FSDP) keep and reduce-scatter gradients in the 16-bit training dtype;
// ZeRO-0/1 (Megatron's DDP and distributed optimizer) accumulate and reduce fp32.
int64_t grad_bytes(const PrecisionBytes& pb, int zero);

struct Workload {
  ModelConfig model;          // model.seq_len is the training sequence length
  int64_t global_batch = 1;   // sequences per optimizer step
  Precision precision = Precision::bf16;
  // Linear layers in fp8 (torchao float8: dynamic scaling, casts before each
  // GEMM; attention, norms and master weights as in `precision`).
  bool fp8_gemms = false;
  // fp8 GEMMs with rowwise scales (torchao's ROWWISE recipe: one scale per
  // row of each operand, a CUTLASS kernel instead of cuBLAS's tensorwise
  // one, and the backward's operands quantized again along their other
  // axis); false: one scale per tensor (TENSORWISE, the default recipe).
  bool fp8_rowwise = false;
  // Separate input and output embeddings (Llama); ModelSpec's table ties them.
  bool untied_embeddings = false;
};

// ModelConfig has no tying flag: the gated-MLP family (Llama) unties its
// embeddings, GPT-2/3 shapes tie them.
inline bool untied_by_family(const ModelConfig& m) { return !m.tied(); }

// Micro-batches per pipeline per step: global_batch / (dp * micro_batch).
int64_t micro_batches(const ParallelLayout& l, const Workload& w);

// partition/layout_check.h's check_layout for the workload's model and batch on
// `gpus` ranks (<= 0: any number).
Status check_layout(const ParallelLayout& l, const Workload& w, int gpus);

}  // namespace tera
