// A parallel layout (tp x pp x dp, virtual chunks, micro-batch, ZeRO stage,
// sequence parallelism, recompute) and the workload it runs (model, global
// batch, precision). Rank order is DESIGN.md's: rank = (pp_rank*dp + dp_rank)*tp
// + tp_rank, so tensor-parallel groups are consecutive ranks inside a node.
// Layers split over the pp*vpp virtual stages as evenly as possible, earlier
// virtual stages taking the remainder.
#pragma once

#include <string>

#include "core/status.h"
#include "core/tensor.h"
#include "model/model_spec.h"
#include "parallel/schedule.h"

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
inline bool untied_by_family(const ModelConfig& m) { return m.mlp == MlpKind::gated; }

// A parallel layout as the planner prices it. (comm/layout.h's Layout is the
// runtime's rank arithmetic; a distinct name keeps the two types, both in
// namespace tera and linked into one binary, from colliding.)
struct PlanLayout {
  int tp = 1;
  int pp = 1;
  int dp = 1;
  int vpp = 1;  // model chunks per pipeline stage (interleaved schedule when > 1)
  int micro_batch = 1;
  int zero = 0;  // ZeRO stage over the data-parallel group
  bool sequence_parallel = false;
  Recompute recompute = Recompute::none;
  ScheduleKind schedule = ScheduleKind::one_f_one_b;
  // Context parallelism: each sequence split over cp ranks (ring attention);
  // rank order tp, cp, dp, pp (Megatron's): cp groups have stride tp, and the
  // data-parallel reduction and ZeRO shards span dp * cp ranks.
  int cp = 1;

  int gpus() const { return tp * pp * dp * cp; }
  int dp_cp() const { return dp * cp; }  // ranks holding the same parameters
  bool operator==(const PlanLayout&) const = default;
};

// Micro-batches per pipeline per step: global_batch / (dp * micro_batch).
int64_t micro_batches(const PlanLayout& l, const Workload& w);

// "tp=8,pp=4,dp=2,vpp=2,mb=1,zero=1,sp=1,recompute=selective,schedule=interleaved"
std::string layout_string(const PlanLayout& l);
// Parses the same keys in any order; absent keys keep their defaults, dp may
// be left out when gpus > 0 (dp = gpus / (tp * pp)); the schedule follows vpp
// unless given. Messages name the key and the fix.
Expected<PlanLayout> parse_layout(const std::string& text, int gpus);

// Checks a layout can run the workload; the message names every factor
// involved, e.g. "tp(2) * pp(4) * dp(3) = 24 != gpus 16".
Status check_layout(const PlanLayout& l, const Workload& w, int gpus);

// Layers of virtual stage v (0 .. pp*vpp-1): the runtime's balanced split
// (model/stage_plan.h layers_per_virtual_stage, which a test holds it equal
// to), as a closed form the search can call without allocating.
int64_t layers_in_virtual_stage(const PlanLayout& l, int64_t layers, int v);

}  // namespace tera
