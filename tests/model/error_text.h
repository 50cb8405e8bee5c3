#pragma once
// Checks on the message of the ignis::Error a statement throws.
#include <gtest/gtest.h>

#include <functional>
#include <string>

#include "ignis/error.h"

namespace ignis::test {

// The message of the ignis::Error that f throws, or "(no error)". Other exceptions escape and
// fail the test.
inline std::string error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const Error& e) {
    return e.what();
  }
  return "(no error)";
}

}  // namespace ignis::test

// Expects `statement` to throw ignis::Error whose message contains `text`.
#define EXPECT_ERROR_CONTAINS(statement, text)                                          \
  do {                                                                                  \
    const std::string ignis_message_ = ::ignis::test::error_of([&] { statement; });     \
    EXPECT_NE(ignis_message_.find(text), std::string::npos)                             \
        << "message: " << ignis_message_ << "\nexpected to contain: " << (text);        \
  } while (0)
