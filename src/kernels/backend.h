// A backend is an object: a table of functions with the signatures of ops.h
// and hooks (below), and the instance's own state (BackendContext: streams,
// library handles, scratch, caches, its allocator), which every entry
// receives first. No backend keeps state in statics, so two backends, or
// two instances of one, live side by side in a process (a test holds cpu and
// gpu-emu at once). Every op is required unless marked otherwise; callers
// ask has() first for the others. Model code holds a `const Backend&` and
// never branches on which backend it is (DESIGN.md invariant 5).
//
// Instances come from the registry (backend_registry.h): make_backend(name).
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "core/device_memory.h"
#include "core/tensor.h"
#include "kernels/ops.h"

namespace tera {

// The state one backend instance keeps; each backend derives its own (the
// cpu backend has none: its entries get null).
class BackendContext {
 public:
  virtual ~BackendContext() = default;
};

// The op list, defined once: X(field, signature, need). The table's fields,
// the Backend's calls, KernelOp, kernel_op_name and the profiling backend's
// wrappers and names all come from it. need is `required` (production code
// calls it; a backend must fill it), `bf16` (train.precision = "bf16" calls
// it: a backend without one of them cannot train in bf16, missing_bf16_ops)
// `cp` (the runtime's ring attention calls it: a backend without one of
// them cannot run cp > 1, missing_cp_ops) or `optional` (benchmarks and
// conformance tests call it, or the model calls it as a fused form of
// required ops when the backend fills it; a backend may leave it null).
#define TERA_BACKEND_OPS(X)                                   \
  /* memory and ordering: the backend owns tensor memory */    \
  X(alloc, AllocFn, required)                                 \
  X(release, ReleaseFn, required)                             \
  X(fill, FillFn, required)                                   \
  X(copy, CopyFn, required)                                   \
  X(synchronize, SynchronizeFn, optional) /* asynchronous backends */ \
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
  X(flash_attention_block_forward, FlashAttentionBlockForwardFn, cp) /* ring attention */ \
  X(flash_attention_block_backward, FlashAttentionBlockBackwardFn, cp) \
  X(copy_columns, CopyColumnsFn, cp) /* ring attention's k,v pack and unpack */ \
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

// What a caller asks of a backend besides ops (every one optional; a null
// hook gives the answer in brackets): X(field, signature).
//   gemm_bf16_path    what executes bf16 GEMMs here, in words (tera train's start-up line) [""]
//   gemm_report       which path each distinct GEMM took so far, one line each [""]
//   unavailable       "" when the backend can run here, else why not in the driver's words [""]
//   memory_available  bytes it can still allocate (a GPU's free memory) [0: unknown]
//   memory_reserved   bytes its runtime holds outside alloc (a GPU's context, a
//                     library workspace, a communication library's buffers) [0]
//   bind_device       makes this process use the device of its rank on the node
//                     (device_for_rank); "" on success, else why not [no devices]
//   device_identity   the physical device this process uses (a GPU's UUID) [""]
//   supports          which (op, dtype) pairs run natively [fp32 only]
#define TERA_BACKEND_HOOKS(X)         \
  X(gemm_bf16_path, GemmPathFn)       \
  X(gemm_report, GemmReportFn)        \
  X(unavailable, UnavailableFn)       \
  X(memory_available, MemoryAvailableFn) \
  X(memory_reserved, MemoryReservedFn) \
  X(bind_device, BindDeviceFn)        \
  X(device_identity, DeviceIdentityFn) \
  X(supports, SupportsFn)

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
enum class OpNeed { required, bf16, cp, optional };
OpNeed kernel_op_need(KernelOp op);
inline bool kernel_op_required(KernelOp op) { return kernel_op_need(op) == OpNeed::required; }

using GemmPathFn = std::string (*)(BackendContext* c);
using GemmReportFn = std::string (*)(BackendContext* c);
using UnavailableFn = std::string (*)(BackendContext* c);
using MemoryAvailableFn = int64_t (*)(BackendContext* c);
using MemoryReservedFn = int64_t (*)(BackendContext* c);
using BindDeviceFn = std::string (*)(BackendContext* c, int local_rank, int local_size);
using DeviceIdentityFn = std::string (*)(BackendContext* c);
using SupportsFn = bool (*)(BackendContext* c, KernelOp op, DType dtype);

// The table: one field per op and per hook (null where a backend has none).
struct BackendOps {
#define TERA_BACKEND_FIELD(op, Fn, ...) Fn op = nullptr;
  TERA_BACKEND_OPS(TERA_BACKEND_FIELD)
  TERA_BACKEND_HOOKS(TERA_BACKEND_FIELD)
#undef TERA_BACKEND_FIELD
};

class Backend {
 public:
  // name and gemm_library: string literals (they outlive every instance).
  Backend(const char* name, const char* gemm_library, DeviceAddressing addressing, BackendOps ops,
          std::shared_ptr<BackendContext> context)
      : name(name), gemm_library(gemm_library), addressing(addressing), ops_(ops), context_(std::move(context)) {}

  const char* name;          // "cpu", "gpu-emu", ...
  const char* gemm_library;  // what executes fp32 GEMMs (reported by benchmarks)
  // How host code reaches this backend's memory: what the device
  // communicator of each process group is (core/device_memory.h).
  DeviceAddressing addressing;

  // Each op, called with the instance's context: be.linear_forward(y, x, ...).
#define TERA_BACKEND_CALL(op, Fn, need)                      \
  template <typename... A>                                   \
  decltype(auto) op(A&&... a) const {                        \
    return ops_.op(context_.get(), std::forward<A>(a)...);   \
  }
  TERA_BACKEND_OPS(TERA_BACKEND_CALL)
#undef TERA_BACKEND_CALL

  // The hooks, with their defaults where the backend has none.
  std::string gemm_bf16_path() const { return ops_.gemm_bf16_path ? ops_.gemm_bf16_path(context()) : ""; }
  std::string gemm_report() const { return ops_.gemm_report ? ops_.gemm_report(context()) : ""; }
  std::string unavailable() const { return ops_.unavailable ? ops_.unavailable(context()) : ""; }
  bool reports_memory() const { return ops_.memory_available != nullptr; }
  int64_t memory_available() const { return ops_.memory_available ? ops_.memory_available(context()) : 0; }
  int64_t memory_reserved() const { return ops_.memory_reserved ? ops_.memory_reserved(context()) : 0; }
  bool binds_devices() const { return ops_.bind_device != nullptr; }
  std::string bind_device(int local_rank, int local_size) const {
    return ops_.bind_device ? ops_.bind_device(context(), local_rank, local_size) : "";
  }
  std::string device_identity() const { return ops_.device_identity ? ops_.device_identity(context()) : ""; }
  bool supports(KernelOp op, DType dtype) const {
    return ops_.supports ? ops_.supports(context(), op, dtype) : dtype == DType::f32;
  }

  bool has(KernelOp op) const;  // the op's entry is filled
  const BackendOps& ops() const { return ops_; }
  BackendContext* context() const { return context_.get(); }
  // The same instance (sharing its context) with another table: wrappers
  // (profiling) and tests of incomplete tables.
  Backend with_ops(const char* new_name, const BackendOps& ops, std::shared_ptr<BackendContext> context) const {
    return Backend(new_name, gemm_library, addressing, ops, std::move(context));
  }

 private:
  BackendOps ops_;
  std::shared_ptr<BackendContext> context_;
};

// The required ops a backend leaves null, comma-separated ("" when complete).
std::string missing_required_ops(const Backend& b);
// The same for the ops train.precision = "bf16" needs ("" when it can).
std::string missing_bf16_ops(const Backend& b);
// The same for the ops context parallelism (cp > 1) needs ("" when it can).
std::string missing_cp_ops(const Backend& b);
inline bool has_op(const Backend& b, KernelOp op) { return b.has(op); }

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

// The process's cpu backend: stateless, so one instance serves everyone
// (kernels/backend_registry.h makes every backend, this one included).
const Backend& cpu_backend();

// Adapters from a kernel that needs no context to a table entry:
// .linear_forward = stateless<cpu::linear_forward<float>>.
template <auto F>
struct StatelessEntry;
template <typename R, typename... A, R (*F)(A...)>
struct StatelessEntry<F> {
  static R call(BackendContext*, A... a) { return F(a...); }
};
template <auto F>
constexpr auto stateless = &StatelessEntry<F>::call;

}  // namespace tera
