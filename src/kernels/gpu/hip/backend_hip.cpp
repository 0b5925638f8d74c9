// The hip backend (backend_hip.h), compiled by hipcc: the runtime context
// shared with cuda, the dialect's kernels, the dialect's GEMMs.
#include "kernels/gpu/hip/backend_hip.h"

#include "kernels/gpu/runtime/runtime_context.h"

namespace tera {

namespace {

class HipContext final : public gpu::RuntimeContext {};

}  // namespace

std::string hip_device_status() { return gpu::runtime_device_status(); }
std::string hip_device_name() { return gpu::runtime_device_name(); }

std::unique_ptr<Backend> make_hip_backend() {
  auto ctx = std::make_shared<HipContext>();
  BackendOps ops;
  gpu::launch::set_dialect_ops(ops);
  gpu::set_runtime_ops(ops);
  gpu::launch::set_tile_gemm_ops(ops);
  ops.gemm_bf16_path = [](BackendContext*) -> std::string {
    return "the dialect's tile GEMMs on the matrix cores (MFMA), bf16 inputs, fp32 accumulation (no hipBLASLt or "
           "rocBLAS in this build)";
  };
  // What the process still takes outside alloc once it runs: the HIP
  // runtime's code objects and context growth beyond what hipSetDevice
  // made, and reduction scratch (an estimate).
  ops.memory_reserved = [](BackendContext*) -> int64_t { return int64_t{256} << 20; };
  const DeviceAddressing addressing{DeviceAddressing::Kind::device, nullptr, static_cast<DeviceQueue*>(ctx.get())};
  return std::make_unique<Backend>("hip", "the dialect's tile GEMMs (MFMA)", addressing, ops, ctx);
}

}  // namespace tera
