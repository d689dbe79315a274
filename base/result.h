// fxprof base: the error-as-value type every module returns for expected failures.
//
// Modules never throw across their boundaries for things that can go wrong in normal use (a missing file, a
// permission refusal, malformed JSON). They return Result<T>: either a value or a one-line message meant for
// the user ("cannot open /x: No such file or directory"). The command-line front end prints the message as
// `fxprof: <message>` and exits non-zero.
#pragma once

#include <string>
#include <utility>
#include <variant>

namespace fxprof {

struct Error {
  std::string message;
  int exit_code = 1;  // what the command-line front end exits with (127: a command that cannot run)
};

// Builds an Error; `Err("cannot open " + path)` reads well at call sites.
inline Error Err(std::string message, int exit_code = 1) { return Error{std::move(message), exit_code}; }

template <class T>
class [[nodiscard]] Result {
 public:
  Result(T value) : v_(std::move(value)) {}      // NOLINT: implicit on purpose, `return value;`
  Result(Error error) : v_(std::move(error)) {}  // NOLINT

  bool ok() const { return v_.index() == 0; }
  explicit operator bool() const { return ok(); }

  T& value() & { return std::get<0>(v_); }
  const T& value() const& { return std::get<0>(v_); }
  T&& value() && { return std::get<0>(std::move(v_)); }
  T* operator->() { return &value(); }
  const T* operator->() const { return &value(); }
  T& operator*() & { return value(); }
  const T& operator*() const& { return value(); }

  const std::string& error() const { return std::get<1>(v_).message; }
  int exit_code() const { return std::get<1>(v_).exit_code; }
  Error take_error() && { return std::get<1>(std::move(v_)); }

 private:
  std::variant<T, Error> v_;
};

// Result of an operation with no value.
template <>
class [[nodiscard]] Result<void> {
 public:
  Result() = default;
  Result(Error error) : err_(std::move(error)), failed_(true) {}  // NOLINT

  bool ok() const { return !failed_; }
  explicit operator bool() const { return ok(); }
  const std::string& error() const { return err_.message; }
  int exit_code() const { return err_.exit_code; }
  Error take_error() && { return std::move(err_); }

 private:
  Error err_;
  bool failed_ = false;
};

using Status = Result<void>;

}  // namespace fxprof
