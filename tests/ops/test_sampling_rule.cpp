// The fixed-point sampling rule shared by the CPU and CUDA paths: the integer 2^-a against
// double exp2, key order, thresholds, and frozen generator values (changing the generator would
// silently change every seeded sample).
#include <gtest/gtest.h>

#include <cmath>
#include <limits>

#include "ops/sampling_rule.h"

namespace ignis {
namespace {

namespace rule = sampling;

TEST(SamplingRule, ExpTableMatchesExp2) {
  for (int j = 0; j < rule::kExpTableSize; ++j) {
    const double want = std::exp2(-j / 256.0);
    const double got = std::ldexp(static_cast<double>(rule::exp2_table_entry(j)), -63);
    EXPECT_NEAR(got, want, 1e-15) << "j " << j;
    const long double exact = std::exp2(-static_cast<long double>(j) / 256);
    EXPECT_LE(std::abs(rule::exp2_table()[j] - exact), std::ldexp(1.0L, -53)) << "within an ulp, j " << j;
  }
}

// Each weight within 4e-15 relative (or a unit and a half) of 2^S * 2^-a, here against long double exp2: the
// rounding to integers, not this, sets the sums' deviation behind the tests' 1e-7 ambiguity margin.
TEST(SamplingRule, WeightsMatchExp2) {
  const double* table = rule::exp2_table();
  for (int bits : {62, 45, 33}) {
    double worst = 0.0;
    for (double a = 0.0; a < 64.0; a += 0.000731) {
      const long double want = std::ldexp(std::exp2(-static_cast<long double>(a)), bits);
      const double got = static_cast<double>(rule::weight_from_exponent(a, table, bits));
      const double err = static_cast<double>(std::abs(got - want));
      if (err > 0.5 + 1.0) worst = std::max(worst, err / static_cast<double>(want));
    }
    EXPECT_LT(worst, 4e-15) << "bits " << bits;
    EXPECT_EQ(rule::weight_from_exponent(0.0, table, bits), std::uint64_t{1} << bits);
  }
  EXPECT_EQ(rule::weight_from_exponent(64.0, table, 62), 0u);
  EXPECT_EQ(rule::weight_from_exponent(std::numeric_limits<double>::infinity(), table, 62), 0u);
  EXPECT_EQ(rule::weight_from_exponent(std::numeric_limits<double>::quiet_NaN(), table, 62), 0u);
  EXPECT_EQ(rule::weight_from_exponent(-1e-300, table, 62), 0u);
}

// At the table's seams (256a half an integer, where the nearest k changes) and at the powers of two the weight
// must not step the wrong way: a larger exponent never gives a larger weight by more than rounding.
TEST(SamplingRule, WeightsAreMonotoneAcrossTableSeams) {
  const double* table = rule::exp2_table();
  for (int bits : {62, 46}) {
    for (int k = 0; k < 64 * 256; k += 7) {
      const double seam = (k + 0.5) / 256.0;
      const double below = std::nextafter(seam, 0.0), above = std::nextafter(seam, 64.0);
      const auto w_below = rule::weight_from_exponent(below, table, bits);
      const auto w_above = rule::weight_from_exponent(above, table, bits);
      EXPECT_LE(w_above, w_below + (w_below >> 50) + 1) << "seam " << seam << " bits " << bits;
    }
  }
}

TEST(SamplingRule, WeightBitsNeverOverflowASum) {
  for (std::int64_t vocab : {1, 2, 3, 17, 1023, 1024, 1025, 50257, 262144, 262145, 1 << 30}) {
    const int bits = rule::weight_bits(vocab);
    EXPECT_LE(bits, 62);
    EXPECT_LE(std::ldexp(static_cast<double>(vocab), bits), std::ldexp(1.0, 63)) << vocab;
    EXPECT_GT(std::ldexp(static_cast<double>(vocab), bits + 1), std::ldexp(1.0, 62)) << "no bit wasted: " << vocab;
  }
}

TEST(SamplingRule, OrderKeysFollowValues) {
  const float inf = std::numeric_limits<float>::infinity();
  const float values[] = {-inf, -3e38f, -2.0f, -1e-40f, 0.0f, 1e-40f, 1.0f, 1.5f, 3e38f, inf};
  for (std::size_t i = 1; i < std::size(values); ++i)
    EXPECT_LT(rule::order_key(values[i - 1]), rule::order_key(values[i])) << values[i];
  EXPECT_EQ(rule::order_key(-0.0f), rule::order_key(0.0f));
}

TEST(SamplingRule, ThresholdsAndTargets) {
  const std::uint64_t total = 1000003;
  EXPECT_EQ(rule::draw_threshold(0, total), 0u);
  EXPECT_EQ(rule::draw_threshold(~std::uint64_t{0}, total), total - 1) << "u < 1";
  EXPECT_EQ(rule::draw_threshold(std::uint64_t{1} << 63, total), total / 2);
  EXPECT_EQ(rule::top_p_target(total, rule::top_p_fixed(0.5)), 500002u) << "ceil(1000003 / 2)";
  EXPECT_EQ(rule::top_p_target(total, rule::top_p_fixed(1e-12)), 1u) << "at least one token";
  EXPECT_EQ(rule::top_p_fixed(1.0), rule::kTopPOff);
  EXPECT_EQ(rule::top_p_fixed(0.25), std::uint64_t{1} << 30);
}

// The expected bits come from python/tests/reference.py, an independent splitmix64 in Python:
// mix64(mix64(mix64(seed) ^ step) ^ row) for the three (seed, step, row) below.
TEST(SamplingRule, GeneratorIsFrozen) {
  EXPECT_EQ(rule::random_bits(0, 0, 0), 2558736989570252433ull);
  EXPECT_EQ(rule::random_bits(42, 7, 3), 17680642119211242809ull);
  EXPECT_EQ(rule::random_bits(~0ull, 1, 2), 8014927313441113208ull);
}

TEST(SamplingRule, PlanFollowsParameters) {
  const auto greedy = rule::make_plan(0.0, 5, 0.5, 1, 2, 100);
  EXPECT_TRUE(greedy.greedy);
  const auto plan = rule::make_plan(0.5, 100, 1.0, 1, 2, 100);
  EXPECT_FALSE(plan.greedy);
  EXPECT_EQ(plan.top_k, 0) << "k >= vocab keeps all";
  EXPECT_EQ(plan.p_fixed, rule::kTopPOff);
  EXPECT_DOUBLE_EQ(plan.scale, 2.0 * rule::kLog2e);
  EXPECT_EQ(plan.bits, rule::weight_bits(100));
}

}  // namespace
}  // namespace ignis
