#pragma once
// The one exception type of ignis. Every message names the argument at fault and the
// expected versus actual value, e.g. "softmax_forward: y.shape: expected [4, 7], got [4, 8]".
#include <sstream>
#include <stdexcept>
#include <string>
#include <tuple>

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

// Message parts kept by reference and streamed only when a message is written, so a check that
// passes builds no string: every op call runs dozens of checks, and an std::ostringstream each cost
// the host ~0.3-1 us (a 16-token CUDA rmsnorm_forward took 9 us to enqueue against 3.5 for an empty
// launch; PERF_NOTES session 31). Only for arguments of one full expression (a check_arg call): the
// parts may be temporaries.
template <class... Parts>
struct LazyConcat {
  std::tuple<const Parts&...> parts;
};

template <class... Parts>
LazyConcat<Parts...> lazy_concat(const Parts&... parts) {
  return {std::tuple<const Parts&...>(parts...)};
}

template <class... Parts>
std::ostream& operator<<(std::ostream& out, const LazyConcat<Parts...>& text) {
  std::apply([&out](const auto&... part) { (out << ... << part); }, text.parts);
  return out;
}
}  // namespace detail

// Throws ignis::Error("<where>: <what>: expected <expected>, got <actual>"). Each part is anything
// an std::ostream takes (strings, numbers, DType, Device, detail::lazy_concat(...)).
template <class Where, class What, class Expected, class Actual>
[[noreturn]] void fail_expected(const Where& where, const What& what, const Expected& expected, const Actual& actual) {
  throw Error(detail::concat(where, ": ", what, ": expected ", expected, ", got ", actual));
}

// Checks a condition; on failure throws with the same message shape as fail_expected. The parts
// are only formatted on failure: pass detail::lazy_concat(...) rather than a built string.
template <class Where, class What, class Expected, class Actual>
void check_arg(bool ok, const Where& where, const What& what, const Expected& expected, const Actual& actual) {
  if (!ok) fail_expected(where, what, expected, actual);
}

}  // namespace ignis
