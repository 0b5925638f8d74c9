// Shapes, dtypes and typed views. Dimension order is outermost first, as in
// PyTorch: shape {B, T, C} means C is contiguous (stride 1) and B has the
// largest stride. Element counts are int64_t. "axis" names a mesh axis (tp,
// pp, dp); "dim" names a tensor dimension.
#pragma once

#include <cstdint>
#include <initializer_list>
#include <string>
#include <type_traits>
#include <vector>

#include "core/check.h"

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

// A typed view of one buffer: its address and its element dtype, so that a
// tensor kept in either of two precisions is one value (one field of a
// struct of views), not an fp32 pointer beside a bf16 twin. The accessors
// assert the dtype: f32() of a bf16 view is a programming error. An empty
// view (a buffer the model does not have) returns null from every accessor.
// TypedView views writable memory; ConstTypedView (what a TypedView
// converts to) read-only memory, as `const float*` does.
template <bool Const>
class BasicTypedView {
  template <typename T>
  using Ptr = std::conditional_t<Const, const T*, T*>;

 public:
  BasicTypedView() = default;
  template <typename T, typename = std::enable_if_t<Const || !std::is_const_v<T>>>
  explicit BasicTypedView(T* ptr) : ptr_(ptr), dtype_(dtype_of<std::remove_const_t<T>>()) {}
  // Read-only from writable.
  template <bool C = Const, typename = std::enable_if_t<C>>
  BasicTypedView(const BasicTypedView<false>& v) : ptr_(v.data()), dtype_(v.dtype()) {}  // NOLINT: implicit

  DType dtype() const { return dtype_; }
  bool empty() const { return ptr_ == nullptr; }
  Ptr<void> data() const { return ptr_; }
  template <typename T>
  Ptr<T> as() const {
    TERA_ASSERT(ptr_ == nullptr || dtype_ == dtype_of<T>(),
                std::string(dtype_name(dtype_)) + " tensor read as " + dtype_name(dtype_of<T>()));
    return static_cast<Ptr<T>>(ptr_);
  }
  Ptr<float> f32() const { return as<float>(); }
  Ptr<uint16_t> bf16() const { return as<uint16_t>(); }  // bf16 values: the upper half of the fp32 pattern

 private:
  Ptr<void> ptr_ = nullptr;
  DType dtype_ = DType::f32;
};
using TypedView = BasicTypedView<false>;
using ConstTypedView = BasicTypedView<true>;

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
