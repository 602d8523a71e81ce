// Result<T>: a value or the Status saying why there is none.
//
// Construct from a T (success) or from a non-OK Status (failure). Constructing from an OK
// Status is a bug and becomes an internal error, so a Result never claims success without
// a value. Accessing the value of a failed Result aborts with the status printed.
#pragma once

#include <cstdio>
#include <cstdlib>
#include <type_traits>
#include <utility>
#include <variant>

#include "common/status.h"

namespace granary {

template <typename T>
class [[nodiscard]] Result {
  static_assert(!std::is_same_v<std::remove_cv_t<T>, Status>, "Result<Status> is meaningless");

 public:
  Result(const T& value) : state_(value) {}            // NOLINT(implicit)
  Result(T&& value) : state_(std::move(value)) {}      // NOLINT(implicit)
  Result(Status status) : state_(std::move(status)) {  // NOLINT(implicit)
    if (std::get<Status>(state_).isOk()) {
      state_ = internalError("Result constructed from an OK status without a value");
    }
  }
  template <typename U>
  requires(std::is_constructible_v<T, U&&> && !std::is_same_v<std::decay_t<U>, T> &&
           !std::is_same_v<std::decay_t<U>, Status> && !std::is_same_v<std::decay_t<U>, Result>)
      Result(U&& value)
      : state_(T(std::forward<U>(value))) {}  // NOLINT(implicit)

  bool isOk() const { return std::holds_alternative<T>(state_); }
  explicit operator bool() const { return isOk(); }

  // OK when a value is held.
  Status status() const { return isOk() ? Status::ok() : std::get<Status>(state_); }

  T& value() & { return checked(), std::get<T>(state_); }
  const T& value() const& { return checked(), std::get<T>(state_); }
  T&& value() && { return checked(), std::get<T>(std::move(state_)); }

  T& operator*() & { return value(); }
  const T& operator*() const& { return value(); }
  T&& operator*() && { return std::move(*this).value(); }
  T* operator->() { return &value(); }
  const T* operator->() const { return &value(); }

  // The value, or `fallback` when failed.
  template <typename U>
  T valueOr(U&& fallback) const& {
    return isOk() ? std::get<T>(state_) : static_cast<T>(std::forward<U>(fallback));
  }

 private:
  void checked() const {
    if (!isOk()) {
      std::fprintf(stderr, "granary: value() of a failed Result: %s\n",
                   std::get<Status>(state_).toString().c_str());
      std::abort();
    }
  }

  std::variant<T, Status> state_;
};

}  // namespace granary

#define GRANARY_CONCAT_INNER_(a, b) a##b
#define GRANARY_CONCAT_(a, b) GRANARY_CONCAT_INNER_(a, b)

// GRANARY_ASSIGN_OR_RETURN(auto x, makeX()); declares x from the value of a Result, or
// returns its Status from the enclosing function.
#define GRANARY_ASSIGN_OR_RETURN(lhs, expr)                     \
  auto GRANARY_CONCAT_(granary_result_, __LINE__) = (expr);     \
  if (!GRANARY_CONCAT_(granary_result_, __LINE__).isOk()) {     \
    return GRANARY_CONCAT_(granary_result_, __LINE__).status(); \
  }                                                             \
  lhs = std::move(GRANARY_CONCAT_(granary_result_, __LINE__)).value()
