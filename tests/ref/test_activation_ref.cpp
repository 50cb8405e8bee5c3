// Reference activations (GELU tanh form, SiLU, SwiGLU): hand values, limits, and every backward
// output against central finite differences.
#include <gtest/gtest.h>

#include <cmath>
#include <numbers>

#include "harness/finite_diff.h"
#include "harness/op_harness.h"
#include "ref/activation.h"

namespace ignis {
namespace {

TEST(RefGelu, HandValuesAndLimits) {
  const auto y = ref::gelu_tanh_forward(std::vector<double>{0.0, 1.0, 30.0, -30.0, 1e200, -1e200});
  EXPECT_EQ(y[0], 0.0);
  // 0.5 (1 + tanh(sqrt(2/pi) * 1.044715)).
  EXPECT_NEAR(y[1], 0.5 * (1.0 + std::tanh(std::sqrt(2.0 / std::numbers::pi) * 1.044715)), 1e-15);
  // Python's math module: 0.5 * (1 + math.tanh(math.sqrt(2 / math.pi) * 1.044715)) = 0.8411919906082768.
  EXPECT_NEAR(y[1], 0.841192, 1e-6);
  EXPECT_EQ(y[2], 30.0);
  EXPECT_EQ(y[3], 0.0);
  EXPECT_EQ(y[4], 1e200);
  EXPECT_EQ(y[5], 0.0);
}

TEST(RefGelu, BackwardLimits) {
  const auto dx = ref::gelu_tanh_backward(std::vector<double>{0.0, 30.0, -30.0, 1e200, -1e200},
                                          std::vector<double>(5, 1.0));
  EXPECT_EQ(dx[0], 0.5);
  EXPECT_EQ(dx[1], 1.0);
  EXPECT_EQ(dx[2], 0.0);
  EXPECT_EQ(dx[3], 1.0) << "a saturated tanh must not give 0 * inf";
  EXPECT_EQ(dx[4], 0.0);
}

TEST(RefSilu, HandValuesAndLimits) {
  const auto y = ref::silu_forward(std::vector<double>{0.0, 1.0, -1.0, 800.0, -800.0});
  EXPECT_EQ(y[0], 0.0);
  EXPECT_NEAR(y[1], 1.0 / (1.0 + std::exp(-1.0)), 1e-15);
  EXPECT_NEAR(y[2], -1.0 / (1.0 + std::exp(1.0)), 1e-15);
  EXPECT_EQ(y[3], 800.0);
  EXPECT_EQ(y[4], 0.0);  // no exp overflow to inf / inf
  const auto dx = ref::silu_backward(std::vector<double>{0.0, 800.0, -800.0}, std::vector<double>(3, 2.0));
  EXPECT_EQ(dx[0], 1.0);  // silu'(0) = 1/2
  EXPECT_EQ(dx[1], 2.0);
  EXPECT_EQ(dx[2], 0.0);
}

TEST(RefSwiGlu, HandValues) {
  const auto out = ref::swiglu_forward(std::vector<double>{0.0, 1.0, 2.0}, std::vector<double>{5.0, 3.0, -1.0});
  EXPECT_EQ(out[0], 0.0);
  EXPECT_NEAR(out[1], 3.0 / (1.0 + std::exp(-1.0)), 1e-15);
  EXPECT_NEAR(out[2], -2.0 / (1.0 + std::exp(-2.0)), 1e-15);
  // At gate 0: dgate = dout * up * silu'(0) = dout * up / 2, dup = dout * silu(0) = 0.
  const auto g = ref::swiglu_backward(std::vector<double>{0.0}, std::vector<double>{6.0}, std::vector<double>{2.0});
  EXPECT_EQ(g.dgate[0], 6.0);
  EXPECT_EQ(g.dup[0], 0.0);
}

TEST(RefActivation, BackwardsMatchFiniteDifferences) {
  auto rng = test::case_rng(300);
  const std::size_t n = 41;
  const auto x = test::random_normal(rng, n, 3.0);
  const auto up = test::random_normal(rng, n, 2.0);
  const auto g = test::random_normal(rng, n);
  EXPECT_LT(test::max_rel_diff(ref::gelu_tanh_backward(x, g),
                               test::numeric_vjp([](const auto& at) { return ref::gelu_tanh_forward(at); }, x, g)),
            1e-7);
  EXPECT_LT(test::max_rel_diff(ref::silu_backward(x, g),
                               test::numeric_vjp([](const auto& at) { return ref::silu_forward(at); }, x, g)),
            1e-7);
  const auto grads = ref::swiglu_backward(x, up, g);
  EXPECT_LT(test::max_rel_diff(grads.dgate,
                               test::numeric_vjp([&](const auto& at) { return ref::swiglu_forward(at, up); }, x, g)),
            1e-7);
  EXPECT_LT(test::max_rel_diff(grads.dup,
                               test::numeric_vjp([&](const auto& at) { return ref::swiglu_forward(x, at); }, up, g)),
            1e-7);
}

}  // namespace
}  // namespace ignis
