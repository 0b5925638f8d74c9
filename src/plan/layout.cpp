// Precisions and the planner's view of the layout check.
#include "plan/layout.h"


namespace tera {

const char* precision_name(Precision p) { return p == Precision::fp32 ? "fp32" : "mixed"; }

Expected<Precision> parse_precision(const std::string& s) {
  if (s == "fp32") return Precision::fp32;
  if (s == "mixed" || s == "bf16" || s == "fp16") return Precision::mixed;
  return Status::error("unknown precision '" + s + "'; choose mixed (16-bit with fp32 master weights) or fp32");
}

PrecisionBytes precision_bytes(Precision p) {
  if (p == Precision::fp32) return {4, 4, 0, 8, DType::f32};
  return {2, 4, 4, 8, DType::bf16};
}

int64_t grad_bytes(const PrecisionBytes& pb, int zero) { return zero >= 2 ? pb.param : pb.grad; }

int64_t micro_batches(const ParallelLayout& l, const Workload& w) {
  return micro_batches_per_step(l, w.global_batch);
}

Status check_layout(const ParallelLayout& l, const Workload& w, int gpus) {
  return check_layout(l, w.model, w.global_batch, gpus);
}

}  // namespace tera
