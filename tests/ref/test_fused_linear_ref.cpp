// The reference fused linear layers: hand-derived values, and identities with the separate
// reference ops they fuse (an identity weight leaves the RMSNorm; SwiGLU of two normed products).
#include <gtest/gtest.h>

#include <cmath>

#include "harness/op_harness.h"
#include "ref/activation.h"
#include "ref/fused_linear.h"
#include "ref/norm.h"

namespace ignis {
namespace {

TEST(FusedLinearRef, RmsnormMatvecHandValues) {
  // x = (3, 4): rms = sqrt(12.5), so xn = (3, 4) / sqrt(12.5) * (1, 2) = (3, 8) * sqrt(2) / 5.
  const std::vector<double> x = {3, 4}, norm_weight = {1, 2}, w = {1, 0, 1, 1, 2, -1};
  const auto y = ref::rmsnorm_matvec(x, norm_weight, w, {1, 2, 3}, 0.0);
  const double s = std::sqrt(2.0) / 5.0;
  ASSERT_EQ(y.size(), 3u);
  EXPECT_NEAR(y[0], 3 * s, 1e-14);
  EXPECT_NEAR(y[1], 11 * s, 1e-14);
  EXPECT_NEAR(y[2], -2 * s, 1e-14);
}

TEST(FusedLinearRef, RmsnormMatvecWithIdentityIsRmsnorm) {
  auto rng = test::case_rng(9100);
  const std::int64_t n = 3, dim = 7;
  const auto x = test::random_normal(rng, n * dim), norm_weight = test::random_normal(rng, dim);
  std::vector<double> identity(dim * dim, 0.0);
  for (std::int64_t i = 0; i < dim; ++i) identity[i * dim + i] = 1.0;
  const auto y = ref::rmsnorm_matvec(x, norm_weight, identity, {n, dim, dim}, 1e-5);
  const auto expected = ref::rmsnorm_forward(x, norm_weight, n, dim, 1e-5);
  ASSERT_EQ(y.size(), expected.size());
  for (std::size_t i = 0; i < y.size(); ++i) EXPECT_NEAR(y[i], expected[i], 1e-14) << i;
}

TEST(FusedLinearRef, MatvecAddHandValues) {
  // Two rows of x against two output rows, added to y.
  const std::vector<double> x = {1, 2, -1, 0.5}, w = {3, 4, 0, -2}, y = {10, 20, 30, 40};
  const auto out = ref::matvec_add(x, w, y, {2, 2, 2});
  EXPECT_EQ(out, (std::vector<double>{10 + 11, 20 - 4, 30 - 1, 40 - 1}));
}

TEST(FusedLinearRef, SwigluMatvecHandValues) {
  // x = (1, -1) has rms 1 (eps 0), so xn = x; gate = 2, up = 3.
  const std::vector<double> x = {1, -1}, norm_weight = {1, 1}, w_gate = {2, 0}, w_up = {0, -3};
  const auto h = ref::rmsnorm_swiglu_matvec(x, norm_weight, w_gate, w_up, {1, 2, 1}, 0.0);
  ASSERT_EQ(h.size(), 1u);
  EXPECT_NEAR(h[0], 2.0 / (1.0 + std::exp(-2.0)) * 3.0, 1e-14);
}

TEST(FusedLinearRef, SwigluMatvecIsSwigluOfTwoNormedProducts) {
  auto rng = test::case_rng(9101);
  const ref::MatvecDims d{2, 5, 3};
  const auto x = test::random_normal(rng, d.n * d.in), norm_weight = test::random_normal(rng, d.in);
  const auto w_gate = test::random_normal(rng, d.out * d.in), w_up = test::random_normal(rng, d.out * d.in);
  const auto h = ref::rmsnorm_swiglu_matvec(x, norm_weight, w_gate, w_up, d, 1e-6);
  const auto expected = ref::swiglu_forward(ref::rmsnorm_matvec(x, norm_weight, w_gate, d, 1e-6),
                                            ref::rmsnorm_matvec(x, norm_weight, w_up, d, 1e-6));
  ASSERT_EQ(h.size(), expected.size());
  for (std::size_t i = 0; i < h.size(); ++i) EXPECT_NEAR(h[i], expected[i], 1e-13) << i;
}

}  // namespace
}  // namespace ignis
