// The CPU backend's memory: device memory is host memory (64-byte aligned
// heap blocks), copies are memcpy, and every op completes before it returns,
// so the backend needs no events. bf16 values are stored as the upper 16
// bits of the fp32 pattern (uint16_t), rounded to nearest even.
#include <cmath>
#include <cstdlib>
#include <cstring>

#include "core/check.h"
#include "kernels/cpu/bf16.h"
#include "kernels/cpu/cpu_ops.h"

namespace tera::cpu {

namespace {

double load(const void* src, DType t, int64_t i) {
  switch (t) {
    case DType::f32: return static_cast<const float*>(src)[i];
    case DType::f64: return static_cast<const double*>(src)[i];
    case DType::bf16: return from_bf16(static_cast<const uint16_t*>(src)[i]);
    case DType::i32: return static_cast<const int32_t*>(src)[i];
    default: TERA_ASSERT(false, std::string("cast from ") + dtype_name(t) + " is not supported");
  }
  return 0;
}

void store(void* dst, DType t, int64_t i, double v) {
  switch (t) {
    case DType::f32: static_cast<float*>(dst)[i] = static_cast<float>(v); return;
    case DType::f64: static_cast<double*>(dst)[i] = v; return;
    case DType::bf16: static_cast<uint16_t*>(dst)[i] = to_bf16(static_cast<float>(v)); return;
    case DType::i32: static_cast<int32_t*>(dst)[i] = static_cast<int32_t>(v); return;
    default: TERA_ASSERT(false, std::string("values of ") + dtype_name(t) + " are not supported");
  }
}

}  // namespace

void cast_to_bf16(uint16_t* dst, const float* src, int64_t n) {
#pragma omp parallel for simd schedule(static)
  for (int64_t i = 0; i < n; ++i) dst[i] = to_bf16(src[i]);
}

void* alloc(int64_t bytes) {
  if (bytes <= 0) return nullptr;
  const size_t rounded = static_cast<size_t>((bytes + 63) / 64 * 64);  // aligned_alloc wants a multiple of 64
  return std::aligned_alloc(64, rounded);
}

void release(void* p) { std::free(p); }

void fill(void* dst, DType t, double value, int64_t n) {
  if (n <= 0) return;
  if (value == 0.0 && !std::signbit(value)) {
    std::memset(dst, 0, static_cast<size_t>(n * dtype_bytes(t)));  // every dtype's zero is all-zero bits
    return;
  }
  if (t == DType::f32) {
    float* d = static_cast<float*>(dst);
    const float v = static_cast<float>(value);
#pragma omp parallel for simd schedule(static)
    for (int64_t i = 0; i < n; ++i) d[i] = v;
    return;
  }
  for (int64_t i = 0; i < n; ++i) store(dst, t, i, value);
}

void copy(void* dst, const void* src, int64_t bytes, CopyKind) {
  if (bytes > 0 && dst != src) std::memcpy(dst, src, static_cast<size_t>(bytes));
}

// dst[rows, ld_dst] <- src[rows, ld_src], the first cols of each row (ops.h).
void copy_columns(float* dst, int64_t ld_dst, const float* src, int64_t ld_src, int64_t rows, int64_t cols) {
  if (rows <= 0 || cols <= 0) return;
  const size_t bytes = static_cast<size_t>(cols) * sizeof(float);
#pragma omp parallel for schedule(static)
  for (int64_t r = 0; r < rows; ++r) std::memcpy(dst + r * ld_dst, src + r * ld_src, bytes);
}

void cast(void* dst, DType dst_t, const void* src, DType src_t, int64_t n) {
  if (dst_t == DType::bf16 && src_t == DType::f32) {
    cast_to_bf16(static_cast<uint16_t*>(dst), static_cast<const float*>(src), n);
    return;
  }
  if (dst_t == DType::f32 && src_t == DType::bf16) {
    const uint16_t* s = static_cast<const uint16_t*>(src);
    float* d = static_cast<float*>(dst);
#pragma omp parallel for schedule(static)
    for (int64_t i = 0; i < n; ++i) d[i] = from_bf16(s[i]);
    return;
  }
  for (int64_t i = 0; i < n; ++i) store(dst, dst_t, i, load(src, src_t, i));
}

}  // namespace tera::cpu
