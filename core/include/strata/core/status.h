// Status and Result<T>: how every Strata module reports failure across its
// boundary (after LevelDB's Status). Cheap to copy when ok; never throws.
//
// The code decides the process exit code at the CLI edge:
//   kInvalidArgument -> 2 (bad input or usage), everything else -> 1.
#pragma once

#include <cassert>
#include <optional>
#include <string>
#include <utility>
#include <variant>

namespace strata {

class [[nodiscard]] Status {
 public:
  enum class Code { kOk, kInvalidArgument, kNotFound, kIOError, kInfeasible, kInternal, kCancelled };

  Status() = default;
  static Status Ok() { return Status(); }
  static Status InvalidArgument(std::string msg) { return Status(Code::kInvalidArgument, std::move(msg)); }
  static Status NotFound(std::string msg) { return Status(Code::kNotFound, std::move(msg)); }
  static Status IOError(std::string msg) { return Status(Code::kIOError, std::move(msg)); }
  static Status Infeasible(std::string msg) { return Status(Code::kInfeasible, std::move(msg)); }
  static Status Internal(std::string msg) { return Status(Code::kInternal, std::move(msg)); }
  // Stopped on request (a signal): not a failure of the work itself.
  static Status Cancelled(std::string msg) { return Status(Code::kCancelled, std::move(msg)); }

  bool ok() const { return code_ == Code::kOk; }
  Code code() const { return code_; }
  const std::string& message() const { return message_; }
  // "InvalidArgument: <message>" style, for logs.
  std::string ToString() const;
  // Exit code convention of every Strata command: 0 ok, 2 bad input, 1 otherwise.
  int ExitCode() const;

 private:
  Status(Code code, std::string msg) : code_(code), message_(std::move(msg)) {}
  Code code_ = Code::kOk;
  std::string message_;
};

// Result<T>: a T or a non-ok Status. REQUIRES for value(): ok().
template <typename T>
class [[nodiscard]] Result {
 public:
  Result(T value) : v_(std::move(value)) {}        // NOLINT: implicit by design
  Result(Status status) : v_(std::move(status)) {  // NOLINT: implicit by design
    assert(!std::get<Status>(v_).ok() && "Result needs a value or an error");
  }

  bool ok() const { return std::holds_alternative<T>(v_); }
  const Status& status() const {
    static const Status kOk;
    return ok() ? kOk : std::get<Status>(v_);
  }
  T& value() & { return std::get<T>(v_); }
  const T& value() const& { return std::get<T>(v_); }
  T&& value() && { return std::get<T>(std::move(v_)); }
  T* operator->() { return &value(); }
  const T* operator->() const { return &value(); }
  T& operator*() & { return value(); }
  const T& operator*() const& { return value(); }

 private:
  std::variant<T, Status> v_;
};

}  // namespace strata

// Propagate a non-ok Status to the caller.
#define STRATA_RETURN_IF_ERROR(expr) \
  do {                               \
    ::strata::Status _st = (expr);   \
    if (!_st.ok()) return _st;       \
  } while (0)

// Evaluates `rexpr`, a Result<T>: returns its Status to the caller when it
// is an error, else moves its value into `lhs` (a declaration, as in
// STRATA_ASSIGN_OR_RETURN(auto plan, BuildPlan(s)), or an assignable
// expression). Expands to several statements: not the body of an unbraced
// if or loop.
#define STRATA_ASSIGN_OR_RETURN(lhs, rexpr) \
  STRATA_ASSIGN_OR_RETURN_IMPL_(STRATA_CONCAT_(strata_result_, __LINE__), lhs, rexpr)
#define STRATA_ASSIGN_OR_RETURN_IMPL_(result, lhs, rexpr) \
  auto result = (rexpr);                                  \
  if (!result.ok()) return result.status();               \
  lhs = std::move(result).value()
#define STRATA_CONCAT_(a, b) STRATA_CONCAT_INNER_(a, b)
#define STRATA_CONCAT_INNER_(a, b) a##b
