#pragma once
// Running maxima of |got - want| for tests that compare whole outputs. A NaN difference counts as
// an infinite error: std::max(err, NaN) returns err, so a plain running max passes an output that
// was never written (the tests poison outputs with NaN) or came out NaN.
#include <cmath>
#include <cstddef>
#include <iterator>
#include <limits>

namespace ignis::test {

// err = max(err, e), where a NaN e makes err infinite.
inline void take_worse(double& err, double e) {
  if (std::isnan(e)) err = std::numeric_limits<double>::infinity();
  else if (e > err) err = e;
}

// max |got[i] - want[i]| over want's elements (got has at least as many), infinite if any is NaN.
template <class Got, class Want>
double max_abs_error(const Got& got, const Want& want) {
  double err = 0.0;
  for (std::size_t i = 0; i < std::size(want); ++i)
    take_worse(err, std::abs(static_cast<double>(got[i]) - static_cast<double>(want[i])));
  return err;
}

}  // namespace ignis::test
