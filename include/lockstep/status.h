// Status and Result<T>: the error type of every public lockstep entry point. An error keeps
// its code and its location (byte offset, line:column, JSON Pointer) all the way out.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <variant>

namespace lockstep {

enum class StatusCode : int {
  kOk = 0,
  kInvalidArgument,    // bad flag, bad id, misuse of the API
  kInvalidRegex,       // regex syntax error or unsupported construct
  kInvalidGrammar,     // EBNF/GBNF syntax or semantic error
  kInvalidSchema,      // JSON Schema is malformed
  kUnsupported,        // valid input we cannot enforce
  kUnsatisfiable,      // the constraint admits no string
  kResourceLimit,      // a budget in the compile options ran out
  kInvalidVocabulary,  // tokenizer file malformed or inconsistent
  kIoError,            // file missing / unreadable
  kInternal,
  kInvalidArtifact = 12,  // compiled artifact (.lsg) malformed, corrupted, foreign or stale
};

const char* StatusCodeName(StatusCode code);

// [[nodiscard]]: a Status or Result dropped on the floor is a warning (an error unchecked).
class [[nodiscard]] Status {
 public:
  Status() = default;
  Status(StatusCode code, std::string message, std::string location = {})
      : code_(code), message_(std::move(message)), location_(std::move(location)) {}

  static Status Ok() { return Status(); }
  bool ok() const { return code_ == StatusCode::kOk; }
  StatusCode code() const { return code_; }
  const std::string& message() const { return message_; }
  // Where the error is: "offset 12", "3:7", "/properties/a", a file path; may be empty.
  const std::string& location() const { return location_; }
  // "invalid regex at offset 3: unmatched ')'\n  a(b))\n      ^" style one-liner (plus snippet).
  std::string ToString() const;

 private:
  StatusCode code_ = StatusCode::kOk;
  std::string message_;
  std::string location_;
};

template <typename T>
class [[nodiscard]] Result {
 public:
  Result(T value) : v_(std::move(value)) {}          // NOLINT: implicit by design
  Result(Status status) : v_(std::move(status)) {}   // NOLINT: implicit by design

  bool ok() const { return v_.index() == 0; }
  const Status& status() const {
    static const Status kOkStatus;
    return ok() ? kOkStatus : std::get<1>(v_);
  }
  T& value() & { return std::get<0>(v_); }
  const T& value() const& { return std::get<0>(v_); }
  T&& value() && { return std::get<0>(std::move(v_)); }
  T& operator*() & { return value(); }
  const T& operator*() const& { return value(); }
  T* operator->() { return &std::get<0>(v_); }
  const T* operator->() const { return &std::get<0>(v_); }

 private:
  std::variant<T, Status> v_;
};

}  // namespace lockstep

#define LOCKSTEP_CONCAT_INNER_(a, b) a##b
#define LOCKSTEP_CONCAT_(a, b) LOCKSTEP_CONCAT_INNER_(a, b)
// Returns the status of `expr` (a Status) from the enclosing function if it is not ok.
#define LOCKSTEP_RETURN_IF_ERROR(expr)            \
  do {                                            \
    ::lockstep::Status _st = (expr);              \
    if (!_st.ok()) return _st;                    \
  } while (0)
// `lhs = value of rexpr (a Result<T>)`, or return its status.
#define LOCKSTEP_ASSIGN_OR_RETURN(lhs, rexpr)                              \
  auto LOCKSTEP_CONCAT_(_res_, __LINE__) = (rexpr);                         \
  if (!LOCKSTEP_CONCAT_(_res_, __LINE__).ok())                              \
    return LOCKSTEP_CONCAT_(_res_, __LINE__).status();                      \
  lhs = std::move(LOCKSTEP_CONCAT_(_res_, __LINE__)).value()
