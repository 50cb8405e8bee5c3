// Reference RMSNorm and LayerNorm: hand-derived values, identities, and every backward output
// (dx, dweight, dbias) against central finite differences.
#include <gtest/gtest.h>

#include <cmath>

#include "harness/finite_diff.h"
#include "harness/op_harness.h"
#include "ref/norm.h"

namespace ignis {
namespace {

TEST(RefRmsNorm, HandValues) {
  // mean([3, 4]^2) = 12.5.
  const double eps = 1e-6;
  const auto y = ref::rmsnorm_forward(std::vector<double>{3.0, 4.0}, std::vector<double>{1.0, 1.0}, 1, 2, eps);
  EXPECT_NEAR(y[0], 3.0 / std::sqrt(12.5 + eps), 1e-15);
  EXPECT_NEAR(y[1], 4.0 / std::sqrt(12.5 + eps), 1e-15);
  // The weight scales each column; rows are independent.
  const auto z = ref::rmsnorm_forward(std::vector<double>{3.0, 4.0, -2.0, 0.0}, std::vector<double>{2.0, -1.0}, 2,
                                      2, 0.0);
  EXPECT_NEAR(z[0], 2.0 * 3.0 / std::sqrt(12.5), 1e-15);
  EXPECT_NEAR(z[1], -4.0 / std::sqrt(12.5), 1e-15);
  EXPECT_NEAR(z[2], 2.0 * -2.0 / std::sqrt(2.0), 1e-15);
  EXPECT_EQ(z[3], 0.0);
}

TEST(RefRmsNorm, UnitRmsAndScaleInvariance) {
  auto rng = test::case_rng(1);
  const std::int64_t rows = 4, dim = 33;
  auto x = test::random_normal(rng, rows * dim, 3.0);
  const std::vector<double> ones(dim, 1.0);
  const auto y = ref::rmsnorm_forward(x, ones, rows, dim, 0.0);
  for (auto& v : x) v *= 50.0;
  const auto y_scaled = ref::rmsnorm_forward(x, ones, rows, dim, 0.0);
  for (std::int64_t r = 0; r < rows; ++r) {
    double ss = 0.0;
    for (std::int64_t c = 0; c < dim; ++c) ss += y[r * dim + c] * y[r * dim + c];
    EXPECT_NEAR(ss / dim, 1.0, 1e-13);
  }
  for (std::size_t i = 0; i < y.size(); ++i) EXPECT_NEAR(y[i], y_scaled[i], 1e-13);
}

TEST(RefRmsNorm, ZeroRowGivesZeros) {
  const auto y = ref::rmsnorm_forward(std::vector<double>(5, 0.0), std::vector<double>(5, 1.0), 1, 5, 1e-5);
  for (double v : y) EXPECT_EQ(v, 0.0);
}

TEST(RefLayerNorm, HandValues) {
  // [1, 3]: mean 2, var 1 -> [-1, 1] / sqrt(1 + eps).
  const double eps = 1e-5;
  const auto y = ref::layernorm_forward(std::vector<double>{1.0, 3.0}, std::vector<double>{1.0, 2.0},
                                        std::vector<double>{0.5, -0.5}, 1, 2, eps);
  EXPECT_NEAR(y[0], -1.0 / std::sqrt(1.0 + eps) + 0.5, 1e-15);
  EXPECT_NEAR(y[1], 2.0 / std::sqrt(1.0 + eps) - 0.5, 1e-15);
}

TEST(RefLayerNorm, ConstantRowGivesBias) {
  const std::vector<double> bias = {0.25, -1.5, 3.0};
  const auto y = ref::layernorm_forward(std::vector<double>{7.0, 7.0, 7.0}, std::vector<double>{2.0, 3.0, 4.0}, bias,
                                        1, 3, 1e-5);
  for (int c = 0; c < 3; ++c) EXPECT_EQ(y[c], bias[c]);
}

TEST(RefLayerNorm, ZeroMeanUnitVarianceAndShiftInvariance) {
  auto rng = test::case_rng(2);
  const std::int64_t rows = 5, dim = 41;
  auto x = test::random_normal(rng, rows * dim, 4.0);
  const std::vector<double> ones(dim, 1.0), zeros(dim, 0.0);
  const auto y = ref::layernorm_forward(x, ones, zeros, rows, dim, 0.0);
  for (auto& v : x) v += 1000.0;
  const auto y_shifted = ref::layernorm_forward(x, ones, zeros, rows, dim, 0.0);
  for (std::int64_t r = 0; r < rows; ++r) {
    double sum = 0.0, sq = 0.0;
    for (std::int64_t c = 0; c < dim; ++c) sum += y[r * dim + c];
    for (std::int64_t c = 0; c < dim; ++c) sq += y[r * dim + c] * y[r * dim + c];
    EXPECT_NEAR(sum / dim, 0.0, 1e-14);
    EXPECT_NEAR(sq / dim, 1.0, 1e-13);
  }
  for (std::size_t i = 0; i < y.size(); ++i) EXPECT_NEAR(y[i], y_shifted[i], 1e-10);
}

// Finite differences with respect to x, weight and (LayerNorm) bias, each with the others fixed.
TEST(RefRmsNorm, BackwardMatchesFiniteDifferences) {
  const double eps = 1e-5;
  for (std::int64_t dim : {1, 3, 17}) {
    auto rng = test::case_rng(100 + dim);
    const std::int64_t rows = 3;
    const auto x = test::random_normal(rng, rows * dim, 2.0);
    const auto w = test::random_normal(rng, dim);
    const auto g = test::random_normal(rng, rows * dim);
    const auto grads = ref::rmsnorm_backward(x, w, g, rows, dim, eps);
    const auto num_dx =
        test::numeric_vjp([&](const auto& at) { return ref::rmsnorm_forward(at, w, rows, dim, eps); }, x, g);
    const auto num_dw =
        test::numeric_vjp([&](const auto& at) { return ref::rmsnorm_forward(x, at, rows, dim, eps); }, w, g);
    EXPECT_LT(test::max_rel_diff(grads.dx, num_dx), 1e-7) << "dx, dim " << dim;
    EXPECT_LT(test::max_rel_diff(grads.dweight, num_dw), 1e-7) << "dweight, dim " << dim;
  }
}

TEST(RefLayerNorm, BackwardMatchesFiniteDifferences) {
  const double eps = 1e-5;
  for (std::int64_t dim : {1, 3, 17}) {
    auto rng = test::case_rng(200 + dim);
    const std::int64_t rows = 3;
    const auto x = test::random_normal(rng, rows * dim, 2.0);
    const auto w = test::random_normal(rng, dim);
    const auto b = test::random_normal(rng, dim);
    const auto g = test::random_normal(rng, rows * dim);
    const auto grads = ref::layernorm_backward(x, w, g, rows, dim, eps);
    const auto num_dx =
        test::numeric_vjp([&](const auto& at) { return ref::layernorm_forward(at, w, b, rows, dim, eps); }, x, g);
    const auto num_dw =
        test::numeric_vjp([&](const auto& at) { return ref::layernorm_forward(x, at, b, rows, dim, eps); }, w, g);
    const auto num_db =
        test::numeric_vjp([&](const auto& at) { return ref::layernorm_forward(x, w, at, rows, dim, eps); }, b, g);
    EXPECT_LT(test::max_rel_diff(grads.dx, num_dx), 1e-7) << "dx, dim " << dim;
    EXPECT_LT(test::max_rel_diff(grads.dweight, num_dw), 1e-7) << "dweight, dim " << dim;
    EXPECT_LT(test::max_rel_diff(grads.dbias, num_db), 1e-7) << "dbias, dim " << dim;
  }
}

}  // namespace
}  // namespace ignis
