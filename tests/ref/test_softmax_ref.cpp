// Reference softmax: hand-derived values, identities, and the backward against finite differences.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>

#include "harness/finite_diff.h"
#include "harness/op_harness.h"
#include "ref/softmax.h"

namespace ignis {
namespace {

TEST(RefSoftmax, HandValues) {
  // softmax([0, ln 3]) = [1/4, 3/4]; softmax([1, 1, 1]) = 1/3 each.
  const std::vector<double> x = {0.0, std::log(3.0)};
  const auto y = ref::softmax_forward(x, 1, 2);
  EXPECT_NEAR(y[0], 0.25, 1e-15);
  EXPECT_NEAR(y[1], 0.75, 1e-15);
  const auto z = ref::softmax_forward(std::vector<double>{1.0, 1.0, 1.0}, 1, 3);
  for (double v : z) EXPECT_NEAR(v, 1.0 / 3.0, 1e-15);
}

TEST(RefSoftmax, RowsSumToOneAndShiftInvariant) {
  auto rng = test::case_rng(1);
  const std::int64_t rows = 5, cols = 17;
  auto x = test::random_normal(rng, rows * cols, 10.0);
  const auto y = ref::softmax_forward(x, rows, cols);
  for (auto& v : x) v += 1000.0;  // large shift: must not overflow, must not change the result
  const auto y_shifted = ref::softmax_forward(x, rows, cols);
  for (std::int64_t r = 0; r < rows; ++r) {
    double sum = 0.0;
    for (std::int64_t c = 0; c < cols; ++c) sum += y[r * cols + c];
    EXPECT_NEAR(sum, 1.0, 1e-14);
  }
  for (std::size_t i = 0; i < y.size(); ++i) EXPECT_NEAR(y[i], y_shifted[i], 1e-12);
}

TEST(RefSoftmax, MaskedEntriesAndFullyMaskedRow) {
  const double inf = std::numeric_limits<double>::infinity();
  const auto y = ref::softmax_forward(std::vector<double>{0.0, -inf, 0.0, -inf, -inf, -inf}, 2, 3);
  EXPECT_DOUBLE_EQ(y[0], 0.5);
  EXPECT_DOUBLE_EQ(y[1], 0.0);
  EXPECT_DOUBLE_EQ(y[2], 0.5);
  for (int c = 3; c < 6; ++c) EXPECT_EQ(y[c], 0.0) << "a fully masked row outputs 0, never NaN";
}

TEST(RefSoftmax, BackwardHandValue) {
  // y = [1/4, 3/4], dy = [1, 0]: sum(dy*y) = 1/4, dx = y * (dy - 1/4) = [3/16, -3/16].
  const auto dx = ref::softmax_backward(std::vector<double>{0.25, 0.75}, std::vector<double>{1.0, 0.0}, 1, 2);
  EXPECT_NEAR(dx[0], 3.0 / 16.0, 1e-15);
  EXPECT_NEAR(dx[1], -3.0 / 16.0, 1e-15);
}

TEST(RefSoftmax, BackwardMatchesFiniteDifferences) {
  for (std::int64_t cols : {1, 3, 17}) {
    auto rng = test::case_rng(100 + cols);
    const std::int64_t rows = 3;
    const auto x = test::random_normal(rng, rows * cols, 2.0);
    const auto g = test::random_normal(rng, rows * cols);
    const auto y = ref::softmax_forward(x, rows, cols);
    const auto analytic = ref::softmax_backward(y, g, rows, cols);
    const auto numeric = test::numeric_vjp([&](const auto& at) { return ref::softmax_forward(at, rows, cols); }, x, g);
    EXPECT_LT(test::max_rel_diff(analytic, numeric), 1e-8) << "cols " << cols;
  }
}

}  // namespace
}  // namespace ignis
