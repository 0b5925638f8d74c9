// The layout of one allocation per buffer class (STYLE.md principle 2): an
// ArenaLayout lists named, typed buffers, each 64-byte aligned, sized in
// bytes. A buffer may be repeated (k = 0 .. repeat-1 equal copies back to
// back: one per pipeline slot, one per layer), so a stage's activations are
// a few dozen entries whatever the layer count. The memory plan
// (partition/memory_plan.h) writes one layout per class; the backend allocates it
// as one DeviceArena (kernels/device_arena.h), and host code never touches
// what is inside.
#pragma once

#include <cstddef>
#include <cstdint>
#include <new>
#include <string>
#include <string_view>
#include <vector>

#include "core/tensor.h"

namespace tera {

// Thrown when an arena cannot be allocated; what() names the buffer class
// and the bytes. cli/main.cpp turns it into a message, never a crash.
class AllocationError : public std::bad_alloc {
 public:
  explicit AllocationError(std::string msg) : msg_(std::move(msg)) {}
  const char* what() const noexcept override { return msg_.c_str(); }

 private:
  std::string msg_;
};

class ArenaLayout {
 public:
  static constexpr int64_t kAlignBytes = 64;   // one cache line, one AVX-512 vector
  static constexpr int64_t kAlignFloats = 16;  // the same in fp32 elements (parameter tables align units by it)

  // name: the buffer class, for messages ("activations", "parameters").
  explicit ArenaLayout(std::string name = "") : name_(std::move(name)) {}
  const std::string& name() const { return name_; }

  struct Entry {
    std::string name;
    DType dtype;
    int64_t count;   // elements of one copy
    int64_t repeat;  // copies, back to back
    int64_t offset;  // bytes from the arena base to copy 0
    int64_t stride;  // bytes between copies: count * dtype bytes rounded up to kAlignBytes
    int64_t bytes() const { return repeat * stride; }
  };
  // Adds `repeat` copies of a buffer of `count` elements of `dtype`; names
  // are unique within a layout. Returns the entry.
  Entry add(std::string name, DType dtype, int64_t count, int64_t repeat = 1);
  // Bytes one buffer of `count` elements of `dtype` takes in an arena.
  static int64_t aligned_bytes(DType dtype, int64_t count);

  int64_t total_bytes() const { return total_; }
  const std::vector<Entry>& entries() const { return entries_; }
  const Entry* find(std::string_view name) const;  // nullptr if absent

 private:
  std::string name_;
  std::vector<Entry> entries_;
  int64_t total_ = 0;
};

}  // namespace tera
