// Precisions and the planner's view of the layout check.
#include "plan/layout.h"

#include "plan/hardware.h"


namespace tera {

const char* precision_name(Precision p) { return p == Precision::fp32 ? "fp32" : "bf16"; }

Expected<Precision> parse_precision(const std::string& s) {
  if (s == "fp32") return Precision::fp32;
  if (s == "bf16" || s == "mixed" || s == "fp16") return Precision::bf16;
  return Status::error("unknown precision '" + s + "'; choose bf16 or fp32 (docs/precision.md)");
}

PrecisionBytes precision_bytes(Precision p, const Stack& stack) {
  if (p == Precision::bf16 && stack.activations_16bit) return {2, 4, 4, 8, DType::bf16};
  return {4, 4, 0, 8, DType::f32};
}

DType gemm_input_dtype(Precision p, const Stack& stack) {
  return p == Precision::bf16 && !stack.activations_16bit ? DType::bf16 : DType::f32;
}

int64_t grad_bytes(const PrecisionBytes& pb, int zero) { return zero >= 2 ? pb.param : pb.grad; }

int64_t micro_batches(const ParallelLayout& l, const Workload& w) {
  return micro_batches_per_step(l, w.global_batch);
}

Status check_layout(const ParallelLayout& l, const Workload& w, int gpus) {
  return check_layout(l, w.model, w.global_batch, gpus);
}

}  // namespace tera
