// Reference sampling: hand-derived masks, tie rules, the generator, and the sampler's statistics.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <set>

#include "harness/op_harness.h"
#include "ref/sampling.h"
#include "ref/softmax.h"

namespace ignis {
namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();

// Indices that a mask keeps (not -inf).
std::vector<int> survivors(const std::vector<double>& masked) {
  std::vector<int> kept;
  for (std::size_t i = 0; i < masked.size(); ++i)
    if (masked[i] != -kInf) kept.push_back(static_cast<int>(i));
  return kept;
}

// Chi-square statistic of `counts` against `probs` over `draws` draws.
double chi_square(const std::vector<int>& counts, const std::vector<double>& probs, int draws) {
  double chi = 0.0;
  for (std::size_t i = 0; i < counts.size(); ++i) {
    const double expected = probs[i] * draws;
    if (expected == 0.0) {
      if (counts[i] != 0) return kInf;
      continue;
    }
    chi += (counts[i] - expected) * (counts[i] - expected) / expected;
  }
  return chi;
}

TEST(RefSampling, TopKHandValuesAndTies) {
  const std::vector<double> x = {1.0, 3.0, 2.0, 3.0, 0.0};
  EXPECT_EQ(survivors(ref::top_k_mask(x, 1, 5, 1)), (std::vector<int>{1})) << "k = 1 is the first argmax";
  EXPECT_EQ(survivors(ref::top_k_mask(x, 1, 5, 2)), (std::vector<int>{1, 3}));
  EXPECT_EQ(survivors(ref::top_k_mask(x, 1, 5, 3)), (std::vector<int>{1, 2, 3}));
  EXPECT_EQ(survivors(ref::top_k_mask(x, 1, 5, 0)).size(), 5u) << "k = 0 keeps all";
  EXPECT_EQ(survivors(ref::top_k_mask(x, 1, 5, 5)).size(), 5u) << "k = vocab keeps all";
  // Equal values: exactly k survive, lowest indices first; -0 equals +0.
  const std::vector<double> equal = {2.0, 2.0, 2.0, 2.0, 2.0, -0.0, 0.0, -0.0};
  EXPECT_EQ(survivors(ref::top_k_mask(equal, 1, 8, 3)), (std::vector<int>{0, 1, 2}));
  EXPECT_EQ(survivors(ref::top_k_mask(equal, 1, 8, 6)), (std::vector<int>{0, 1, 2, 3, 4, 5}));
  const auto kept = ref::top_k_mask(x, 1, 5, 2);
  EXPECT_EQ(kept[1], 3.0) << "survivors keep their logits";
}

TEST(RefSampling, TopKOfOneIsArgmax) {
  auto rng = test::case_rng(11);
  const std::int64_t rows = 7, vocab = 33;
  const auto x = test::random_normal(rng, rows * vocab);
  const auto masked = ref::top_k_mask(x, rows, vocab, 1);
  for (std::int64_t r = 0; r < rows; ++r) {
    std::int64_t best = 0;
    for (std::int64_t i = 1; i < vocab; ++i)
      if (x[r * vocab + i] > x[r * vocab + best]) best = i;
    for (std::int64_t i = 0; i < vocab; ++i)
      EXPECT_EQ(masked[r * vocab + i] != -kInf, i == best) << "row " << r << " index " << i;
  }
}

TEST(RefSampling, TopPHandValues) {
  // probabilities 0.5, 0.25, 0.125, 0.125 (in the order 2, 0, 1, 3 by logit).
  const std::vector<double> x = {std::log(0.25), std::log(0.125), std::log(0.5), std::log(0.125)};
  EXPECT_EQ(survivors(ref::top_p_mask(x, 1, 4, 1e-6).masked), (std::vector<int>{2})) << "tiny p keeps the max";
  EXPECT_EQ(survivors(ref::top_p_mask(x, 1, 4, 0.6).masked), (std::vector<int>{0, 2}));
  EXPECT_EQ(survivors(ref::top_p_mask(x, 1, 4, 0.8).masked), (std::vector<int>{0, 1, 2}))
      << "of the equal 0.125s the lower index comes first";
  EXPECT_EQ(survivors(ref::top_p_mask(x, 1, 4, 1.0).masked).size(), 4u) << "p = 1 keeps all";
  const auto cut = ref::top_p_mask(x, 1, 4, 0.6);
  EXPECT_NEAR(cut.margin[0], 0.1, 1e-12) << "0.6 lies 0.1 from the boundaries 0.5 and 0.75";
  // Ties in the maximum: a tiny p keeps only the lowest index.
  EXPECT_EQ(survivors(ref::top_p_mask(std::vector<double>{1.0, 5.0, 5.0}, 1, 3, 1e-3).masked), (std::vector<int>{1}));
  // -inf logits carry no mass and a row without a finite logit is left as it is.
  const std::vector<double> masked_row = {-kInf, 0.0, -kInf, 0.0, -kInf, -kInf};
  EXPECT_EQ(survivors(ref::top_p_mask(masked_row, 1, 6, 0.99).masked), (std::vector<int>{1, 3}));
  const std::vector<double> empty_row = {-kInf, -kInf, -kInf, 0.0, 5.0, -kInf};
  const auto out = ref::top_p_mask(empty_row, 2, 3, 0.5);
  EXPECT_EQ(survivors(out.masked), (std::vector<int>{4}));
  for (int i = 0; i < 3; ++i) EXPECT_EQ(out.masked[i], -kInf) << "never NaN";
}

TEST(RefSampling, GreedyAndTemperature) {
  const std::vector<double> x = {0.5, 2.0, -1.0, 2.0};
  SamplingParams greedy;
  greedy.temperature = 0.0;
  EXPECT_EQ(ref::sample(x, 1, 4, greedy).ids[0], 1) << "T = 0 is the lowest-index argmax";
  // sample(x / T) at temperature 1 equals sample(x) at temperature T, for every seed.
  auto rng = test::case_rng(12);
  const std::int64_t rows = 16, vocab = 40;
  const auto logits = test::random_normal(rng, rows * vocab, 2.0);
  std::vector<double> scaled(logits.size());
  for (std::size_t i = 0; i < logits.size(); ++i) scaled[i] = logits[i] / 0.5;
  for (std::uint64_t seed = 0; seed < 8; ++seed) {
    SamplingParams hot{0.5, 0, 1.0, seed, 3};
    SamplingParams plain{1.0, 0, 1.0, seed, 3};
    EXPECT_EQ(ref::sample(logits, rows, vocab, hot).ids, ref::sample(scaled, rows, vocab, plain).ids);
  }
  // A top-k of 1 or a tiny top-p samples the argmax whatever the temperature.
  SamplingParams k1{5.0, 1, 1.0, 7, 0};
  SamplingParams p_tiny{5.0, 0, 1e-9, 7, 0};
  EXPECT_EQ(ref::sample(x, 1, 4, k1).ids[0], 1);
  EXPECT_EQ(ref::sample(x, 1, 4, p_tiny).ids[0], 1);
}

TEST(RefSampling, UniformDrawsReproduceAndDiffer) {
  std::set<double> seen;
  for (std::uint64_t seed = 0; seed < 4; ++seed)
    for (std::uint64_t step = 0; step < 4; ++step)
      for (std::uint64_t row = 0; row < 4; ++row) {
        const double u = ref::sampling_uniform(seed, step, row);
        EXPECT_GE(u, 0.0);
        EXPECT_LT(u, 1.0);
        EXPECT_EQ(u, ref::sampling_uniform(seed, step, row));
        seen.insert(u);
      }
  EXPECT_EQ(seen.size(), 64u) << "every (seed, step, row) draws its own u";
}

TEST(RefSampling, SeedsReproduceAndDifferentSeedsDiffer) {
  auto rng = test::case_rng(13);
  const std::int64_t rows = 64, vocab = 50;
  const auto logits = test::random_normal(rng, rows * vocab);
  const SamplingParams a{1.0, 0, 1.0, 1234, 5};
  SamplingParams b = a;
  b.seed = 1235;
  SamplingParams c = a;
  c.step = 6;
  const auto ids = ref::sample(logits, rows, vocab, a).ids;
  EXPECT_EQ(ids, ref::sample(logits, rows, vocab, a).ids);
  EXPECT_NE(ids, ref::sample(logits, rows, vocab, b).ids);
  EXPECT_NE(ids, ref::sample(logits, rows, vocab, c).ids);
}

// 20000 draws from a 5-token distribution: a chi-square test with 4 degrees of freedom at the
// 0.1% level (critical value 18.47), with and without truncation.
TEST(RefSampling, DrawsFollowTheDistribution) {
  const std::vector<double> probs = {0.1, 0.2, 0.3, 0.15, 0.25};
  std::vector<double> x;
  for (double p : probs) x.push_back(std::log(p));
  struct Case {
    SamplingParams params;
    std::vector<double> expected;
  };
  const std::vector<Case> cases = {
      {{1.0, 0, 1.0, 99, 0}, probs},
      {{1.0, 3, 1.0, 99, 0}, {0.0, 0.2 / 0.75, 0.3 / 0.75, 0.0, 0.25 / 0.75}},
      {{1.0, 0, 0.5, 99, 0}, {0.0, 0.0, 0.3 / 0.55, 0.0, 0.25 / 0.55}},
  };
  const int draws = 20000;
  for (const auto& c : cases) {
    std::vector<int> counts(5);
    SamplingParams params = c.params;
    for (int d = 0; d < draws; ++d) {
      params.step = static_cast<std::uint64_t>(d);
      ++counts[ref::sample(x, 1, 5, params).ids[0]];
    }
    EXPECT_LT(chi_square(counts, c.expected, draws), 18.47) << "top_k " << params.top_k << " top_p " << params.top_p;
  }
  // Temperature 2 flattens the distribution to softmax(log(p) / 2).
  std::vector<double> half(x.size());
  for (std::size_t i = 0; i < x.size(); ++i) half[i] = x[i] / 2.0;
  const auto flat = ref::softmax_forward(half, 1, 5);
  std::vector<int> counts(5);
  for (int d = 0; d < draws; ++d)
    ++counts[ref::sample(x, 1, 5, {2.0, 0, 1.0, 5, static_cast<std::uint64_t>(d)}).ids[0]];
  EXPECT_LT(chi_square(counts, flat, draws), 18.47);
}

TEST(RefSampling, MaskedRowsAndMargins) {
  const std::vector<double> x = {-kInf, -kInf, -kInf, 1.0, -kInf, 1.0};
  const auto out = ref::sample(x, 2, 3, {1.0, 0, 1.0, 3, 0});
  EXPECT_EQ(out.ids[0], 0) << "a row without a finite logit gives its argmax";
  EXPECT_TRUE(out.ids[1] == 0 || out.ids[1] == 2);
  EXPECT_GT(out.margin[1], 0.0);
  EXPECT_LE(out.margin[1], 0.5);
}

}  // namespace
}  // namespace ignis
