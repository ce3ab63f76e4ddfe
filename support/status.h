// One status type for the runtime, the tools and (later) the tuner and server: a Status is ok
// or carries a message; Expected<T> is a value or a Status. Errors are values, never exceptions.
#pragma once

#include <optional>
#include <string>
#include <utility>

namespace mxfp6 {

class Status {
 public:
  Status() = default;
  static Status ok() { return Status(); }
  static Status error(std::string message) { return Status(std::move(message)); }

  bool isOk() const { return !message_.has_value(); }
  explicit operator bool() const { return isOk(); }
  const std::string& message() const {
    static const std::string kOk = "ok";
    return message_ ? *message_ : kOk;
  }

 private:
  explicit Status(std::string message) : message_(std::move(message)) {}
  std::optional<std::string> message_;
};

template <typename T>
class Expected {
 public:
  Expected(T value) : value_(std::move(value)) {}             // NOLINT: implicit by design
  Expected(Status status) : status_(std::move(status)) {}     // NOLINT: must be an error
  bool isOk() const { return value_.has_value(); }
  explicit operator bool() const { return isOk(); }
  const Status& status() const { return status_; }
  T& operator*() { return *value_; }
  const T& operator*() const { return *value_; }
  T* operator->() { return &*value_; }
  const T* operator->() const { return &*value_; }
  T take() { return std::move(*value_); }

 private:
  std::optional<T> value_;
  Status status_;
};

}  // namespace mxfp6

#define MXFP6_CONCAT_INNER(a, b) a##b
#define MXFP6_CONCAT(a, b) MXFP6_CONCAT_INNER(a, b)

/// Returns the status from the enclosing function when `expr` is an error.
#define RETURN_IF_ERROR(expr)                          \
  do {                                                 \
    ::mxfp6::Status mxfp6_status_ = (expr);            \
    if (!mxfp6_status_.isOk()) return mxfp6_status_;   \
  } while (0)

/// `ASSIGN_OR_RETURN(auto x, f())`: binds the value or returns the error status.
#define ASSIGN_OR_RETURN(decl, expr)                                        \
  auto MXFP6_CONCAT(mxfp6_expected_, __LINE__) = (expr);                    \
  if (!MXFP6_CONCAT(mxfp6_expected_, __LINE__).isOk())                      \
    return MXFP6_CONCAT(mxfp6_expected_, __LINE__).status();                \
  decl = MXFP6_CONCAT(mxfp6_expected_, __LINE__).take()
