// A backend is a table of functions with the signatures of ops.h. Every entry
// is required unless marked optional; optional entries may be null and callers
// ask supports() first. Model code holds a `const Backend&` and never branches
// on which backend it is (DESIGN.md invariant 5).
#pragma once

#include <string_view>

#include "core/tensor.h"
#include "kernels/ops.h"

namespace tera {

enum class KernelOp { gemm, linear, layernorm, gelu, attention, residual, cross_entropy, embedding, adamw, sum_squares };

struct Backend {
  const char* name;
  const char* gemm_library;  // what executes GEMMs (reported by benchmarks)
  GemmFn gemm;
  LinearForwardFn linear_forward;
  LinearBackwardFn linear_backward;
  LayerNormForwardFn layernorm_forward;
  LayerNormBackwardFn layernorm_backward;
  GeluForwardFn gelu_forward;
  GeluBackwardFn gelu_backward;
  AttentionForwardFn attention_forward;
  AttentionBackwardFn attention_backward;
  ResidualForwardFn residual_forward;
  CrossEntropyFn cross_entropy;
  SoftmaxRowFn softmax_row;
  EmbeddingLookupFn embedding_lookup;
  EmbeddingLookupBackwardFn embedding_lookup_backward;
  PositionAddFn position_add;
  PositionAddBackwardFn position_add_backward;
  BiasResidualFn bias_residual;
  CeMaxFn ce_max;
  CeExpSumFn ce_exp_sum;
  CeFinalizeFn ce_finalize;
  AdamWFn adamw;
  SumSquaresFn sum_squares;
  // optional: which (op, dtype) pairs run natively; null means fp32 only.
  bool (*supports)(KernelOp op, DType dtype);
};

const Backend& cpu_backend();

// Looks a backend up by name ("cpu"); nullptr if unknown or not built.
const Backend* find_backend(std::string_view name);

}  // namespace tera
