// Strata's error type: every failure a user can cause surfaces as an Error carrying one sentence.
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
