// Strata's error types: every failure a user can cause surfaces as an Error carrying one sentence;
// a broken internal invariant (a bug in Strata, not in the input) is an InternalError.
#pragma once

#include <fmt/format.h>

#include <stdexcept>
#include <string>
#include <utility>

namespace strata {

class Error : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// Thrown by STRATA_CHECK: the message says which invariant broke and where, so a bug report can
// name it; it is never the user's doing.
class InternalError : public Error {
 public:
  using Error::Error;
};

template <class... Args>
[[noreturn]] void internal_failure(const char* file, int line, fmt::format_string<Args...> format, Args&&... args) {
  throw InternalError(fmt::format("internal error (a bug in Strata, at {}:{}): {}", file, line,
                                  fmt::format(format, std::forward<Args>(args)...)));
}

template <class... Args>
[[noreturn]] void fail(fmt::format_string<Args...> format, Args&&... args) {
  throw Error(fmt::format(format, std::forward<Args>(args)...));
}

}  // namespace strata

// Checks a condition that depends on user input or the environment; throws strata::Error otherwise.
#define STRATA_REQUIRE(condition, ...)  \
  do {                                  \
    if (!(condition)) {                 \
      ::strata::fail(__VA_ARGS__);      \
    }                                   \
  } while (false)

// Checks an internal invariant (the schedule, the shard layout, a buffer size); throws
// strata::InternalError naming the file and line. Kept in release builds: they are cheap.
#define STRATA_CHECK(condition, ...)                                    \
  do {                                                                  \
    if (!(condition)) {                                                 \
      ::strata::internal_failure(__FILE__, __LINE__, __VA_ARGS__);      \
    }                                                                   \
  } while (false)
