// One allocation per buffer class, pointers carved from a table (STYLE.md
// principle 2). A class (parameters, gradients, optimizer state, activations,
// workspace) is described by an ArenaLayout: named fp32 buffers, each aligned
// to 64 bytes. The Arena allocates the layout's total once and is the number
// the memory report prints, so the report is what the process really holds.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <new>
#include <string>
#include <vector>

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
  // name: the buffer class, for messages ("activations", "params").
  explicit ArenaLayout(std::string name = "") : name_(std::move(name)) {}
  const std::string& name() const { return name_; }
  static constexpr int64_t kAlignFloats = 16;  // 64 bytes: one cache line, one AVX-512 vector

  // Adds a buffer of `count` floats; returns its offset (in floats) in the arena.
  int64_t add(std::string name, int64_t count);
  int64_t total_floats() const { return total_; }
  int64_t total_bytes() const { return total_ * 4; }
  struct Entry {
    std::string name;
    int64_t offset;  // floats from the arena base
    int64_t count;   // floats
  };
  const std::vector<Entry>& entries() const { return entries_; }

 private:
  std::string name_;
  std::vector<Entry> entries_;
  int64_t total_ = 0;
};

class Arena {
 public:
  Arena() = default;
  // Allocates layout.total_bytes(), zero-filled (pages touched once, here);
  // throws AllocationError when the memory is not there.
  explicit Arena(const ArenaLayout& layout);
  float* base() const { return base_.get(); }
  float* at(int64_t offset_floats) const { return base_.get() + offset_floats; }
  int64_t bytes() const { return bytes_; }

 private:
  struct Free {
    void operator()(float* p) const;
  };
  std::unique_ptr<float, Free> base_;
  int64_t bytes_ = 0;
};

}  // namespace tera
