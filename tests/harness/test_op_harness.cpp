// The harness itself must be able to fail: it flags unwritten (poisoned) outputs, errors beyond
// the rule, and low-precision results worse than twice the naive same-precision error.
#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "harness/max_error.h"
#include "harness/op_harness.h"

namespace ignis::test {
namespace {

TEST(OpHarness, PoisonIsDetected) {
  Tensor t = make_poisoned({5}, DType::f32, Device::cpu());
  auto got = read_tensor(t);
  for (double v : got) EXPECT_TRUE(std::isnan(v));
  got[0] = got[1] = got[2] = got[3] = 0.5;  // one element left unwritten
  EXPECT_FALSE(close_to_reference(got, {0.5, 0.5, 0.5, 0.5, 0.5}, DType::f32));
}

TEST(OpHarness, F32RuleIsRelativeToScale) {
  EXPECT_TRUE(close_to_reference({100.0001}, {100.0}, DType::f32));  // 1e-6 relative
  EXPECT_FALSE(close_to_reference({100.01}, {100.0}, DType::f32));   // 1e-4 relative
}

TEST(OpHarness, LowPrecisionRuleUsesNaiveError) {
  const std::vector<double> ref = {1.0 / 3.0, 2.0 / 3.0};
  const auto naive = quantize(ref, DType::bf16);
  EXPECT_TRUE(close_to_reference(naive, ref, DType::bf16, naive));
  std::vector<double> worse = {ref[0] + 0.01, ref[1]};  // ~5x bf16's rounding error
  EXPECT_FALSE(close_to_reference(worse, ref, DType::bf16, naive));
  EXPECT_FALSE(close_to_reference(naive, ref, DType::bf16)) << "a bf16 check without the naive result must fail";
}

TEST(OpHarness, InfinitiesMustMatch) {
  EXPECT_TRUE(close_to_reference({INFINITY, 1.0}, {INFINITY, 1.0}, DType::f32));
  EXPECT_FALSE(close_to_reference({1e30, 1.0}, {INFINITY, 1.0}, DType::f32));
}

TEST(OpHarness, QuantizeRoundsThroughTheDtype) {
  EXPECT_EQ(quantize({1.0 + 1e-9}, DType::f32)[0], 1.0);
  EXPECT_EQ(quantize({1.00390625}, DType::bf16)[0], 1.0);  // 1 + 2^-8 ties to even
  EXPECT_EQ(quantize({65520.0}, DType::f16)[0], INFINITY);
}

// The engine tests' running maximum: a NaN anywhere (an output left poisoned) is the worst error.
TEST(MaxError, NanIsAnInfiniteError) {
  const std::vector<float> want{1.0f, 2.0f, 3.0f};
  EXPECT_EQ(max_abs_error(std::vector<float>{1.0f, 2.5f, 3.0f}, want), 0.5);
  EXPECT_EQ(max_abs_error(std::vector<float>{std::nanf(""), 2.0f, 3.0f}, want), INFINITY);
  EXPECT_EQ(max_abs_error(std::vector<float>{1.0f, 2.0f, std::nanf("")}, want), INFINITY);
  double err = 4.0;
  take_worse(err, 1.0);
  EXPECT_EQ(err, 4.0);
  take_worse(err, std::nan(""));
  take_worse(err, 1.0);
  EXPECT_EQ(err, INFINITY);
}

TEST(OpHarness, CaseRngGivesFreshInputsPerCase) {
  auto a = case_rng(1), b = case_rng(2);
  EXPECT_NE(random_normal(a, 4), random_normal(b, 4));
}

}  // namespace
}  // namespace ignis::test
