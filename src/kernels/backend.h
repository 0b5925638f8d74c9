// A backend is a table of functions with the signatures of ops.h. Every entry
// is required unless marked optional; optional entries may be null and callers
// ask supports() first. Model code holds a `const Backend&` and never branches
// on which backend it is (DESIGN.md invariant 5).
#pragma once

#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "core/device_memory.h"
#include "core/tensor.h"
#include "kernels/ops.h"

namespace tera {

// The op list, defined once: X(field, signature, need). The Backend's
// fields, KernelOp, kernel_op_name and the profiling backend's wrappers and
// names all come from it. need is `required` (production code calls it; a
// backend must fill it), `bf16` (train.precision = "bf16" calls it: a backend
// without one of them cannot train in bf16, missing_bf16_ops) or `optional`
// (benchmarks and conformance tests call it, or the model calls it as a
// fused form of required ops when the backend fills it; a backend may leave
// it null).
#define TERA_BACKEND_OPS(X)                                   \
  /* memory and ordering: the backend owns tensor memory */    \
  X(alloc, AllocFn, required)                                 \
  X(release, ReleaseFn, required)                             \
  X(fill, FillFn, required)                                   \
  X(copy, CopyFn, required)                                   \
  X(event_create, EventCreateFn, optional) /* asynchronous backends */ \
  X(event_destroy, EventDestroyFn, optional)                  \
  X(event_record, EventRecordFn, optional)                    \
  X(stream_wait, StreamWaitFn, optional)                      \
  X(synchronize, SynchronizeFn, optional)                     \
  /* the model's ops */                                       \
  X(gemm, GemmFn, optional) /* the model calls linear_* */    \
  X(linear_forward, LinearForwardFn, required)                \
  X(linear_backward, LinearBackwardFn, required)              \
  X(linear_forward_bf16, LinearForwardBf16Fn, bf16)           \
  X(linear_backward_bf16, LinearBackwardBf16Fn, bf16)         \
  X(linear_gelu_forward_bf16, LinearGeluForwardBf16Fn, optional) /* fused; else the two ops */ \
  X(linear_backward_gelu_bf16, LinearBackwardGeluBf16Fn, optional) \
  X(layernorm_forward, LayerNormForwardFn, required)          \
  X(layernorm_backward, LayerNormBackwardFn, required)        \
  X(rmsnorm_forward, RmsNormForwardFn, required)              \
  X(rmsnorm_backward, RmsNormBackwardFn, required)            \
  X(gelu_forward, GeluForwardFn, required)                    \
  X(gelu_backward, GeluBackwardFn, required)                  \
  X(swiglu_forward, SwigluForwardFn, required)                \
  X(swiglu_backward, SwigluBackwardFn, required)              \
  X(layernorm_forward_bf16, LayerNormForwardBf16Fn, bf16)     \
  X(rmsnorm_forward_bf16, RmsNormForwardBf16Fn, bf16)         \
  X(gelu_forward_bf16, GeluForwardBf16Fn, bf16)               \
  X(gelu_backward_bf16, GeluBackwardBf16Fn, bf16)             \
  X(swiglu_forward_bf16, SwigluForwardBf16Fn, bf16)           \
  X(swiglu_backward_bf16, SwigluBackwardBf16Fn, bf16)         \
  X(rope_forward, RopeFn, required)                           \
  X(rope_backward, RopeFn, required)                          \
  X(attention_forward, AttentionForwardFn, required)          \
  X(attention_backward, AttentionBackwardFn, required)        \
  X(flash_attention_forward, FlashAttentionForwardFn, required) \
  X(flash_attention_backward, FlashAttentionBackwardFn, required) \
  X(flash_attention_forward_bf16, FlashAttentionForwardBf16Fn, bf16) \
  X(flash_attention_backward_bf16, FlashAttentionBackwardBf16Fn, bf16) \
  X(residual_forward, ResidualForwardFn, required)            \
  X(cross_entropy, CrossEntropyFn, optional) /* fused; training uses ce_* */ \
  X(softmax_row, SoftmaxRowFn, required)                      \
  X(embedding_lookup, EmbeddingLookupFn, required)            \
  X(embedding_lookup_backward, EmbeddingLookupBackwardFn, required) \
  X(position_add, PositionAddFn, required)                    \
  X(position_add_backward, PositionAddBackwardFn, required)   \
  X(bias_residual, BiasResidualFn, required)                  \
  X(ce_max, CeMaxFn, required)                                \
  X(ce_exp_sum, CeExpSumFn, required)                         \
  X(ce_finalize, CeFinalizeFn, required)                      \
  /* the step's reductions and the optimizer, over many tensors */ \
  X(accumulate_sum, AccumulateSumFn, required)                \
  X(sum_squares, SumSquaresFn, required)                      \
  X(count_nonfinite, CountNonfiniteFn, required)              \
  X(adamw, AdamWFn, required)                                 \
  X(cast, CastFn, bf16)                                       \
  X(tile_gemm_bf16, TileGemmBf16Fn, optional) /* GPU backends: the tile primitive's check */

enum class KernelOp {
#define TERA_KERNEL_OP_ENUM(op, Fn, need) op,
  TERA_BACKEND_OPS(TERA_KERNEL_OP_ENUM)
#undef TERA_KERNEL_OP_ENUM
};
constexpr int kKernelOps = 0
#define TERA_KERNEL_OP_COUNT(op, Fn, need) +1
    TERA_BACKEND_OPS(TERA_KERNEL_OP_COUNT)
#undef TERA_KERNEL_OP_COUNT
    ;
const char* kernel_op_name(KernelOp op);  // the field's name: "linear_forward"
enum class OpNeed { required, bf16, optional };
OpNeed kernel_op_need(KernelOp op);
inline bool kernel_op_required(KernelOp op) { return kernel_op_need(op) == OpNeed::required; }

struct Backend {
  const char* name = nullptr;
  const char* gemm_library = nullptr;  // what executes GEMMs (reported by benchmarks)
  // What executes bf16 GEMMs on this machine, in words (optional: with the
  // bf16 linear ops); tera train prints it once at start-up.
  const char* (*gemm_bf16_path)() = nullptr;
  // optional: "" when the backend can run here, else why not in the
  // driver's words (cuda without a usable GPU); tera train exits 2 with it.
  std::string (*unavailable)() = nullptr;
  // optional: bytes this backend can still allocate (a GPU's free memory),
  // 0 when unknown. tera train checks each rank's memory plan against it
  // before allocating; without it, against the host's available memory.
  int64_t (*memory_available)() = nullptr;
  // optional: makes this process use the device of its rank on the node
  // (device_for_rank) for everything after; "" on success, else why not.
  // tera train calls it once the ranks know their node, before any
  // allocation. Backends of one device per process (cpu) leave it null.
  std::string (*bind_device)(int local_rank, int local_size) = nullptr;
  // optional: the identity of the physical device this process now uses
  // (a GPU's UUID as nvidia-smi prints it), "" when unknown. tera train
  // compares the ranks' after bind_device: two ranks on one GPU (every rank
  // shown the same single GPU) are refused before NCCL would be.
  std::string (*device_identity)() = nullptr;
  // How host code reaches this backend's memory: what the device
  // communicator of each process group is (core/device_memory.h).
  DeviceAddressing addressing;
#define TERA_BACKEND_FIELD(op, Fn, need) Fn op = nullptr;
  TERA_BACKEND_OPS(TERA_BACKEND_FIELD)
#undef TERA_BACKEND_FIELD
  // optional: which (op, dtype) pairs run natively; null means fp32 only.
  bool (*supports)(KernelOp op, DType dtype) = nullptr;
};

// The required ops a backend leaves null, comma-separated ("" when complete).
std::string missing_required_ops(const Backend& b);
// The same for the ops train.precision = "bf16" needs ("" when it can).
std::string missing_bf16_ops(const Backend& b);
// Whether the backend fills op (a non-null entry).
bool has_op(const Backend& b, KernelOp op);

// The device the local_rank-th of local_size ranks on a node uses when the
// process sees `devices` devices: one rank per device (local_rank), or
// device 0 when each process sees a single device (srun --gpus-per-task=1,
// or CUDA_VISIBLE_DEVICES set per rank); -1 when there are more ranks than
// devices to give them, or no device.
int device_for_rank(int local_rank, int local_size, int devices);
// Why device_for_rank found no device: local_size ranks on a node whose
// processes each see `devices` devices, and what to do about it.
std::string too_few_devices(int local_size, int devices);
// The first two ranks (a < b, the lowest such b) whose device identities
// (Backend::device_identity, one per rank in rank order) are equal and not
// empty; {-1, -1} when every rank has a device of its own.
std::pair<int, int> ranks_sharing_a_device(const std::vector<std::string>& identities);

const Backend& cpu_backend();
// The CPU kernels over device memory that host code cannot touch: every
// pointer it hands out faults when the host dereferences it, and every op
// checks that it was given device pointers (kernels/guarded/). CI runs the
// trainer on it to prove that nothing outside kernels/ touches tensor memory.
const Backend& cpu_guarded_backend();

// Looks a backend up by name ("cpu", "cpu-guarded", "gpu-emu", and "cuda"
// where it is built); nullptr if unknown or not built into this binary.
const Backend* find_backend(std::string_view name);
// The names find_backend knows, comma-separated ("cpu, cpu-guarded, gpu-emu").
std::string backend_names();

}  // namespace tera
