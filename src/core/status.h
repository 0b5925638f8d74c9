// Status and Expected<T>: how code below cli/ reports bad input (configs, data
// files, checkpoints). The message names the file or field and the fix; cli/
// turns a failed Status into exit code 2. Nothing below cli/ calls exit().
#pragma once

#include <optional>
#include <string>
#include <utility>
#include <variant>

#include "core/check.h"

namespace tera {

class Status {
 public:
  Status() = default;  // ok
  static Status ok() { return Status(); }
  static Status error(std::string msg) {
    Status s;
    s.msg_ = std::move(msg);
    s.failed_ = true;
    return s;
  }
  bool is_ok() const { return !failed_; }
  explicit operator bool() const { return !failed_; }
  const std::string& message() const { return msg_; }

 private:
  bool failed_ = false;
  std::string msg_;
};

// A value or an error message. Access the value only after checking ok().
template <typename T>
class Expected {
 public:
  Expected(T value) : v_(std::move(value)) {}  // NOLINT: implicit on purpose
  Expected(Status st) : v_(std::move(st)) { TERA_ASSERT(!std::get<Status>(v_).is_ok(), "Expected from an ok Status"); }
  bool ok() const { return v_.index() == 0; }
  explicit operator bool() const { return ok(); }
  T& value() & {
    TERA_ASSERT(ok(), "Expected::value() on error: " + error());
    return std::get<0>(v_);
  }
  const T& value() const& {
    TERA_ASSERT(ok(), "Expected::value() on error: " + error());
    return std::get<0>(v_);
  }
  T&& value() && {
    TERA_ASSERT(ok(), "Expected::value() on error: " + error());
    return std::move(std::get<0>(v_));
  }
  T* operator->() { return &value(); }
  const T* operator->() const { return &value(); }
  T& operator*() { return value(); }
  const std::string& error() const {
    static const std::string none;
    return ok() ? none : std::get<Status>(v_).message();
  }
  Status status() const { return ok() ? Status::ok() : std::get<Status>(v_); }

 private:
  std::variant<T, Status> v_;
};

}  // namespace tera

// Propagates a failed Status out of the enclosing function.
#define TERA_RETURN_IF_ERROR(expr)                \
  do {                                            \
    ::tera::Status _tera_st = (expr);             \
    if (!_tera_st.is_ok()) return _tera_st;       \
  } while (0)
