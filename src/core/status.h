// Status and Expected<T>: how code below cli/ reports bad input (configs, data
// files, checkpoints). The message names the file or field and the fix; cli/
// turns a failed Status into exit code 2. Nothing below cli/ calls exit().
// A failure carries a kind, so that callers decide by kind, never by the
// message's text.
#pragma once

#include <optional>
#include <string>
#include <utility>
#include <variant>

#include "core/check.h"

namespace tera {

enum class StatusKind {
  ok,
  bad_input,    // the input named in the message is wrong (the usual failure)
  peer_failed,  // another rank failed collectively; that rank's message names the problem
};

class Status {
 public:
  Status() = default;  // ok; ok_status() says so where it is returned
  static Status error(std::string msg, StatusKind kind = StatusKind::bad_input) {
    TERA_ASSERT(kind != StatusKind::ok, "Status::error of kind ok");
    Status s;
    s.msg_ = std::move(msg);
    s.kind_ = kind;
    return s;
  }
  // This rank is fine but another failed (collective verdicts): cli/ prints
  // such a message only on the first rank, the failing rank prints its own.
  static Status peer_failed(std::string msg) { return error(std::move(msg), StatusKind::peer_failed); }
  bool is_ok() const { return kind_ == StatusKind::ok; }
  StatusKind kind() const { return kind_; }
  explicit operator bool() const { return is_ok(); }
  const std::string& message() const { return msg_; }

 private:
  StatusKind kind_ = StatusKind::ok;
  std::string msg_;
};

// The OK status. A free function, not a static member: `st.ok()` on an
// instance would compile and mean "OK" rather than "is it OK?".
inline Status ok_status() { return Status(); }

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
  Status status() const { return ok() ? ok_status() : std::get<Status>(v_); }

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
