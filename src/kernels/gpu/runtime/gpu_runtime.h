// The GPU runtime calls the cuda and hip backends make, under one set of
// names (namespace rt): CUDA's runtime under nvcc, HIP's under hipcc. The
// two agree call for call on everything tera uses (memory, pinned memory,
// streams, events, device queries); this header is the whole difference,
// so runtime_context.h is one source compiled twice.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

#include "core/device_memory.h"
#include "kernels/gpu/dialect.h"

#if defined(TERA_GPU_CUDA)
#include <cuda_runtime.h>
#elif defined(TERA_GPU_HIP)
#include <hip/hip_runtime.h>
#endif

TERA_GPU_BEGIN

namespace rt {

#if defined(TERA_GPU_CUDA)
using Error = cudaError_t;
using StreamT = cudaStream_t;
using EventT = cudaEvent_t;
constexpr Error kSuccess = cudaSuccess;
constexpr Error kNotReady = cudaErrorNotReady;
constexpr const char* kVendor = "cuda";
constexpr const char* kRuntime = "CUDA";
inline const char* error_string(Error e) { return cudaGetErrorString(e); }
inline Error last_error() { return cudaGetLastError(); }
inline Error device_alloc(void** p, size_t n) { return cudaMalloc(p, n); }
inline Error device_free(void* p) { return cudaFree(p); }
inline Error pinned_alloc(void** p, size_t n) { return cudaMallocHost(p, n); }
inline Error pinned_free(void* p) { return cudaFreeHost(p); }
inline Error copy_async(void* dst, const void* src, size_t n, CopyKind k, StreamT s) {
  const cudaMemcpyKind kind = k == CopyKind::host_to_device   ? cudaMemcpyHostToDevice
                              : k == CopyKind::device_to_host ? cudaMemcpyDeviceToHost
                                                              : cudaMemcpyDeviceToDevice;
  return cudaMemcpyAsync(dst, src, n, kind, s);
}
inline Error stream_create(StreamT* s) { return cudaStreamCreateWithFlags(s, cudaStreamNonBlocking); }
inline Error stream_destroy(StreamT s) { return cudaStreamDestroy(s); }
inline Error stream_sync(StreamT s) { return cudaStreamSynchronize(s); }
inline Error stream_wait(StreamT s, EventT e) { return cudaStreamWaitEvent(s, e, 0); }
inline Error event_create(EventT* e) { return cudaEventCreateWithFlags(e, cudaEventDisableTiming); }
inline Error event_destroy(EventT e) { return cudaEventDestroy(e); }
inline Error event_record(EventT e, StreamT s) { return cudaEventRecord(e, s); }
inline Error event_query(EventT e) { return cudaEventQuery(e); }
inline Error event_sync(EventT e) { return cudaEventSynchronize(e); }
inline Error device_count(int* n) { return cudaGetDeviceCount(n); }
inline Error set_device(int d) { return cudaSetDevice(d); }
inline Error get_device(int* d) { return cudaGetDevice(d); }
inline Error device_sync() { return cudaDeviceSynchronize(); }
inline Error mem_info(size_t* free_bytes, size_t* total_bytes) { return cudaMemGetInfo(free_bytes, total_bytes); }
// The device's UUID bytes (16), false when the runtime cannot say.
inline bool device_uuid(int device, unsigned char out[16]) {
  cudaDeviceProp p{};
  if (cudaGetDeviceProperties(&p, device) != cudaSuccess) return false;
  for (int i = 0; i < 16; ++i) out[i] = static_cast<unsigned char>(p.uuid.bytes[i]);
  return true;
}
// Name, architecture and multiprocessor count, in words.
inline std::string device_description(int device) {
  cudaDeviceProp p{};
  if (cudaGetDeviceProperties(&p, device) != cudaSuccess) return "?";
  return std::string(p.name) + " (sm_" + std::to_string(p.major) + std::to_string(p.minor) + ", " +
         std::to_string(p.multiProcessorCount) + " SMs)";
}
#elif defined(TERA_GPU_HIP)
using Error = hipError_t;
using StreamT = hipStream_t;
using EventT = hipEvent_t;
constexpr Error kSuccess = hipSuccess;
constexpr Error kNotReady = hipErrorNotReady;
constexpr const char* kVendor = "hip";
constexpr const char* kRuntime = "HIP";
inline const char* error_string(Error e) { return hipGetErrorString(e); }
inline Error last_error() { return hipGetLastError(); }
inline Error device_alloc(void** p, size_t n) { return hipMalloc(p, n); }
inline Error device_free(void* p) { return hipFree(p); }
inline Error pinned_alloc(void** p, size_t n) { return hipHostMalloc(p, n, hipHostMallocDefault); }
inline Error pinned_free(void* p) { return hipHostFree(p); }
inline Error copy_async(void* dst, const void* src, size_t n, CopyKind k, StreamT s) {
  const hipMemcpyKind kind = k == CopyKind::host_to_device   ? hipMemcpyHostToDevice
                             : k == CopyKind::device_to_host ? hipMemcpyDeviceToHost
                                                             : hipMemcpyDeviceToDevice;
  return hipMemcpyAsync(dst, src, n, kind, s);
}
inline Error stream_create(StreamT* s) { return hipStreamCreateWithFlags(s, hipStreamNonBlocking); }
inline Error stream_destroy(StreamT s) { return hipStreamDestroy(s); }
inline Error stream_sync(StreamT s) { return hipStreamSynchronize(s); }
inline Error stream_wait(StreamT s, EventT e) { return hipStreamWaitEvent(s, e, 0); }
inline Error event_create(EventT* e) { return hipEventCreateWithFlags(e, hipEventDisableTiming); }
inline Error event_destroy(EventT e) { return hipEventDestroy(e); }
inline Error event_record(EventT e, StreamT s) { return hipEventRecord(e, s); }
inline Error event_query(EventT e) { return hipEventQuery(e); }
inline Error event_sync(EventT e) { return hipEventSynchronize(e); }
inline Error device_count(int* n) { return hipGetDeviceCount(n); }
inline Error set_device(int d) { return hipSetDevice(d); }
inline Error get_device(int* d) { return hipGetDevice(d); }
inline Error device_sync() { return hipDeviceSynchronize(); }
inline Error mem_info(size_t* free_bytes, size_t* total_bytes) { return hipMemGetInfo(free_bytes, total_bytes); }
inline bool device_uuid(int device, unsigned char out[16]) {
  hipUUID u{};
  if (hipDeviceGetUuid(&u, device) != hipSuccess) return false;
  for (int i = 0; i < 16; ++i) out[i] = static_cast<unsigned char>(u.bytes[i]);
  return true;
}
inline std::string device_description(int device) {
  hipDeviceProp_t p{};
  if (hipGetDeviceProperties(&p, device) != hipSuccess) return "?";
  return std::string(p.name) + " (" + p.gcnArchName + ", " + std::to_string(p.multiProcessorCount) + " CUs)";
}
#endif

}  // namespace rt

TERA_GPU_END
