// tessera::Status and StatusOr<T>: the error type of every tessera library.
//
// Library code never throws. A function that can fail returns Status (or StatusOr<T> when it
// also produces a value); the caller must look at it ([[nodiscard]]). Codes follow abseil's
// canonical set. Expected outcomes such as "does not fit" are values in result types, not
// errors (see placement/policy.h).
//
//   StatusOr<int> ParsePort(std::string_view s);
//   TESSERA_ASSIGN_OR_RETURN(int port, ParsePort(text));   // returns the error upward
//
// Thread-safety: values; safe to copy between threads.
#pragma once

#include <cassert>
#include <optional>
#include <string>
#include <string_view>
#include <utility>

namespace tessera {

enum class StatusCode : int {
  kOk = 0,
  kCancelled = 1,
  kUnknown = 2,
  kInvalidArgument = 3,
  kDeadlineExceeded = 4,
  kNotFound = 5,
  kAlreadyExists = 6,
  kPermissionDenied = 7,
  kResourceExhausted = 8,
  kFailedPrecondition = 9,
  kAborted = 10,
  kOutOfRange = 11,
  kUnimplemented = 12,
  kInternal = 13,
  kUnavailable = 14,
  kDataLoss = 15,
  kUnauthenticated = 16,
};

std::string_view StatusCodeName(StatusCode code);

class [[nodiscard]] Status {
 public:
  Status() = default;  // OK
  Status(StatusCode code, std::string message) : code_(code), message_(std::move(message)) {}

  static Status Ok() { return Status(); }

  bool ok() const { return code_ == StatusCode::kOk; }
  StatusCode code() const { return code_; }
  const std::string& message() const { return message_; }

  // "INVALID_ARGUMENT: pods.csv:12:3: cpu_milli: negative value -5", or "OK".
  std::string ToString() const;

  // Returns a copy whose message is "<prefix>: <message>" (same code). OK stays OK.
  Status WithPrefix(std::string_view prefix) const;

  friend bool operator==(const Status& a, const Status& b) {
    return a.code_ == b.code_ && a.message_ == b.message_;
  }

 private:
  StatusCode code_ = StatusCode::kOk;
  std::string message_;
};

Status InvalidArgumentError(std::string message);
Status NotFoundError(std::string message);
Status OutOfRangeError(std::string message);
Status FailedPreconditionError(std::string message);
Status ResourceExhaustedError(std::string message);
Status InternalError(std::string message);
Status UnimplementedError(std::string message);
Status AlreadyExistsError(std::string message);
Status UnavailableError(std::string message);
Status DataLossError(std::string message);

// Holds either a value or a non-OK Status.
template <typename T>
class [[nodiscard]] StatusOr {
 public:
  StatusOr(const Status& status) : status_(status) {  // NOLINT: implicit by design
    if (status_.ok()) status_ = InternalError("StatusOr constructed from OK status without value");
  }
  StatusOr(Status&& status) : status_(std::move(status)) {  // NOLINT
    if (status_.ok()) status_ = InternalError("StatusOr constructed from OK status without value");
  }
  StatusOr(const T& value) : value_(value) {}             // NOLINT
  StatusOr(T&& value) : value_(std::move(value)) {}       // NOLINT

  bool ok() const { return status_.ok(); }
  const Status& status() const { return status_; }

  const T& value() const& {
    assert(ok());
    return *value_;
  }
  T& value() & {
    assert(ok());
    return *value_;
  }
  T&& value() && {
    assert(ok());
    return std::move(*value_);
  }
  const T& operator*() const& { return value(); }
  T& operator*() & { return value(); }
  T&& operator*() && { return std::move(*this).value(); }
  const T* operator->() const { return &value(); }
  T* operator->() { return &value(); }

 private:
  Status status_;
  std::optional<T> value_;
};

}  // namespace tessera

#define TESSERA_STATUS_CONCAT_INNER_(a, b) a##b
#define TESSERA_STATUS_CONCAT_(a, b) TESSERA_STATUS_CONCAT_INNER_(a, b)

// Evaluates expr (a Status); returns it from the enclosing function if it is not OK.
#define TESSERA_RETURN_IF_ERROR(expr)               \
  do {                                              \
    ::tessera::Status tessera_status_ = (expr);     \
    if (!tessera_status_.ok()) return tessera_status_; \
  } while (0)

// TESSERA_ASSIGN_OR_RETURN(lhs, expr): evaluates expr (a StatusOr<T>); on error returns its
// Status, otherwise assigns (or declares) lhs from the value.
#define TESSERA_ASSIGN_OR_RETURN(lhs, expr) \
  TESSERA_ASSIGN_OR_RETURN_IMPL_(TESSERA_STATUS_CONCAT_(tessera_statusor_, __LINE__), lhs, expr)
#define TESSERA_ASSIGN_OR_RETURN_IMPL_(tmp, lhs, expr) \
  auto tmp = (expr);                                   \
  if (!tmp.ok()) return tmp.status();                  \
  lhs = std::move(tmp).value()
