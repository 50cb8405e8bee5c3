#pragma once
// The one exception type of ignis. Every message names the argument at fault and the
// expected versus actual value, e.g. "softmax_forward: y.shape: expected [4, 7], got [4, 8]".
#include <sstream>
#include <stdexcept>
#include <string>

namespace ignis {

class Error : public std::runtime_error {
 public:
  explicit Error(const std::string& message) : std::runtime_error(message) {}
};

namespace detail {
template <class... Parts>
std::string concat(const Parts&... parts) {
  std::ostringstream out;
  (out << ... << parts);
  return out.str();
}
}  // namespace detail

// Throws ignis::Error("<where>: <what>: expected <expected>, got <actual>").
template <class Expected, class Actual>
[[noreturn]] void fail_expected(const std::string& where, const std::string& what, const Expected& expected,
                                const Actual& actual) {
  throw Error(detail::concat(where, ": ", what, ": expected ", expected, ", got ", actual));
}

// Checks a condition; on failure throws with the same message shape as fail_expected.
template <class Expected, class Actual>
void check_arg(bool ok, const std::string& where, const std::string& what, const Expected& expected,
               const Actual& actual) {
  if (!ok) fail_expected(where, what, expected, actual);
}

}  // namespace ignis
