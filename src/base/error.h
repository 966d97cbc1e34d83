#pragma once

#include <expected>
#include <string>
#include <utility>

namespace gpuhost {

// What went wrong, coarsely, so callers can branch on it; the message says the rest.
enum class ErrorCode {
  not_found,          // a file, key, library, symbol or device that is not there
  permission_denied,  // the OS refused access
  invalid_argument,   // the caller (often the user) asked for something impossible
  parse_error,        // input exists but is malformed
  io_error,           // an OS call failed for another reason
  timeout,            // a deadline passed
  unavailable,        // a capability is absent on this host (no driver, no registry on POSIX)
  unsupported,        // the request makes no sense on this OS or build
  internal,           // a bug in gpuhost
};

// An expected failure, as a value. `message` reads "<what we tried>: <why>".
struct Error {
  ErrorCode code = ErrorCode::internal;
  std::string message;
};

template <typename T>
using Result = std::expected<T, Error>;

// Builds the unexpected side of a Result: `return make_error(ErrorCode::not_found, "...")`.
[[nodiscard]] inline std::unexpected<Error> make_error(ErrorCode code, std::string message) {
  return std::unexpected<Error>(Error{code, std::move(message)});
}

// Prefixes an error's message with more context, keeping its code.
[[nodiscard]] inline Error with_context(Error error, std::string_view context) {
  error.message = std::string(context) + ": " + error.message;
  return error;
}

[[nodiscard]] const char* error_code_name(ErrorCode code);

}  // namespace gpuhost

// GPUHOST_TRY(expr): evaluates a Result; on error returns it from the enclosing function, otherwise
// yields the value. Uses a GNU statement expression (GCC and MinGW GCC both accept it;
// __extension__ keeps -Wpedantic quiet about it).
#define GPUHOST_TRY(...)                                             \
  __extension__({                                                    \
    auto gpuhost_try_result_ = (__VA_ARGS__);                        \
    if (!gpuhost_try_result_)                                        \
      return std::unexpected<::gpuhost::Error>(                      \
          std::move(gpuhost_try_result_).error());                   \
    std::move(*gpuhost_try_result_);                                 \
  })

// GPUHOST_TRY_VOID(expr): the same for a Result<void>, as a statement.
#define GPUHOST_TRY_VOID(...)                                        \
  do {                                                               \
    auto gpuhost_try_void_result_ = (__VA_ARGS__);                   \
    if (!gpuhost_try_void_result_)                                   \
      return std::unexpected<::gpuhost::Error>(                      \
          std::move(gpuhost_try_void_result_).error());              \
  } while (false)
