// Test support: runs code that must throw strata::Error and returns the sentence.
#pragma once

#include <gtest/gtest.h>

#include <string>

#include "core/error.hpp"

namespace strata::testing {

// Fails the current test when f does not throw strata::Error.
template <class F>
std::string error_of(F&& f) {
  try {
    f();
  } catch (const Error& e) {
    return e.what();
  }
  ADD_FAILURE() << "expected a strata::Error";
  return "";
}

}  // namespace strata::testing
