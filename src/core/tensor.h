// Shapes and dtypes. Dimension order is outermost first, as in PyTorch:
// shape {B, T, C} means C is contiguous (stride 1) and B has the largest
// stride. Element counts are int64_t. "axis" names a mesh axis (tp, pp, dp);
// "dim" names a tensor dimension.
#pragma once

#include <cstdint>
#include <initializer_list>
#include <string>
#include <vector>

namespace tera {

enum class DType { f32, bf16, f16, i32, u8, f64 };

inline int64_t dtype_bytes(DType t) {
  switch (t) {
    case DType::f32:
    case DType::i32: return 4;
    case DType::bf16:
    case DType::f16: return 2;
    case DType::u8: return 1;
    case DType::f64: return 8;
  }
  return 0;
}
inline const char* dtype_name(DType t) {
  switch (t) {
    case DType::f32: return "f32";
    case DType::bf16: return "bf16";
    case DType::f16: return "f16";
    case DType::i32: return "i32";
    case DType::u8: return "u8";
    case DType::f64: return "f64";
  }
  return "?";
}

// The DType of a C++ element type, for typed views of untyped memory
// (DeviceArena::get<T> checks the buffer's dtype against it).
template <typename T>
constexpr DType dtype_of();
template <>
constexpr DType dtype_of<float>() { return DType::f32; }
template <>
constexpr DType dtype_of<double>() { return DType::f64; }
template <>
constexpr DType dtype_of<int32_t>() { return DType::i32; }
template <>
constexpr DType dtype_of<uint8_t>() { return DType::u8; }
template <>
constexpr DType dtype_of<uint16_t>() { return DType::bf16; }  // bf16 values: the upper half of the fp32 pattern

using Shape = std::vector<int64_t>;

inline int64_t numel(const Shape& s) {
  int64_t n = 1;
  for (int64_t d : s) n *= d;
  return n;
}

inline std::string shape_str(const Shape& s) {
  std::string out = "[";
  for (size_t i = 0; i < s.size(); ++i) out += (i ? ", " : "") + std::to_string(s[i]);
  return out + "]";
}

inline int64_t round_up(int64_t n, int64_t multiple) { return (n + multiple - 1) / multiple * multiple; }

}  // namespace tera
