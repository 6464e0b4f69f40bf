// SPDX-License-Identifier: MIT
// ftjit's one error type and the expected-style Result<T> that carries it.
#pragma once

#include <cassert>
#include <cstdint>
#include <string>
#include <utility>
#include <variant>

#include "ftjit/ftjit.h"

namespace ftjit {

// An error: a status code from the public C API plus a message that carries
// the context (symbol, address, expected and found bytes...).
struct Error {
  ftjit_status code = FTJIT_E_INTERNAL;
  std::string message;
};

// Creates an Error; the one place to put a breakpoint on every failure.
[[nodiscard]] Error make_error(ftjit_status code, std::string message);

// An address or offset for a message, as printf's %#llx writes it
// ("0x1f", and "0" for zero).
std::string format_hex(uint64_t v);

// Either a T or an Error. Cheap to move; test with ok() before value().
template <typename T>
class [[nodiscard]] Result {
 public:
  Result(T value) : v_(std::move(value)) {}             // NOLINT: implicit
  Result(Error error) : v_(std::move(error)) {}         // NOLINT: implicit
  bool ok() const { return v_.index() == 0; }
  explicit operator bool() const { return ok(); }
  T& value() & { assert(ok()); return std::get<0>(v_); }
  const T& value() const& { assert(ok()); return std::get<0>(v_); }
  T&& value() && { assert(ok()); return std::get<0>(std::move(v_)); }
  T* operator->() { return &value(); }
  const T* operator->() const { return &value(); }
  T& operator*() & { return value(); }
  const Error& error() const { assert(!ok()); return std::get<1>(v_); }
  Error&& take_error() { assert(!ok()); return std::get<1>(std::move(v_)); }

 private:
  std::variant<T, Error> v_;
};

// Result<void>: success or an Error.
template <>
class [[nodiscard]] Result<void> {
 public:
  Result() = default;
  Result(Error error) : error_(std::move(error)), ok_(false) {}  // NOLINT
  bool ok() const { return ok_; }
  explicit operator bool() const { return ok_; }
  const Error& error() const { assert(!ok_); return error_; }
  Error&& take_error() { assert(!ok_); return std::move(error_); }

 private:
  Error error_;
  bool ok_ = true;
};

using Status = Result<void>;

}  // namespace ftjit

// Propagates the error of a Result-returning expression to the caller.
#define FTJIT_TRY(expr)                                  \
  do {                                                   \
    auto&& ftjit_try_r_ = (expr);                        \
    if (!ftjit_try_r_.ok()) return ftjit_try_r_.take_error(); \
  } while (0)
