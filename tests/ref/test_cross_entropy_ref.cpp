// Reference cross-entropy: hand values, pad exclusion, all-pad batches, large logits, and the
// gradient of the mean loss against finite differences.
#include <gtest/gtest.h>

#include <cmath>

#include "harness/finite_diff.h"
#include "harness/op_harness.h"
#include "ignis/error.h"
#include "model/error_text.h"
#include "ref/cross_entropy.h"

namespace ignis {
namespace {

TEST(RefCrossEntropy, UniformLogitsGiveLogVocab) {
  for (std::int64_t vocab : {1, 2, 7, 1000}) {
    const std::vector<double> logits(2 * vocab, 0.25);
    const auto r = ref::cross_entropy(logits, std::vector<std::int64_t>{0, vocab - 1}, vocab, -1);
    EXPECT_NEAR(r.loss, std::log(static_cast<double>(vocab)), 1e-12) << vocab;
    // d/dx = (1/vocab - onehot) / 2.
    EXPECT_NEAR(r.dlogits[0], (1.0 / vocab - 1.0) / 2.0, 1e-15);
    if (vocab > 1) EXPECT_NEAR(r.dlogits[1], 1.0 / vocab / 2.0, 1e-15);
  }
}

TEST(RefCrossEntropy, DominantTargetLogitGivesNearZeroLoss) {
  // loss = log(1 + 3 e^-20) ~= 3 e^-20 for a target logit 20 above three zeros.
  const std::vector<double> logits = {0.0, 20.0, 0.0, 0.0};
  const auto r = ref::cross_entropy(logits, std::vector<std::int64_t>{1}, 4, -1);
  EXPECT_NEAR(r.loss, 3.0 * std::exp(-20.0), 1e-14);  // lse ~ 20 carries ulps of 3.6e-15
  // The same dominant logit on a wrong target costs about 20.
  EXPECT_NEAR(ref::cross_entropy(logits, std::vector<std::int64_t>{0}, 4, -1).loss, 20.0, 1e-8);
}

TEST(RefCrossEntropy, PadRowsAreExcludedFromTheMean) {
  // Row 0: uniform over 4 -> ln 4. Row 1: [ln 3, 0, 0, 0] with target 0 -> ln(6/3) = ln 2. Row 2: pad.
  const std::vector<double> logits = {0, 0, 0, 0, std::log(3.0), 0, 0, 0, 9, 9, 9, 9};
  const auto r = ref::cross_entropy(logits, std::vector<std::int64_t>{2, 0, 7}, 4, 7);
  EXPECT_EQ(r.count, 2);
  EXPECT_NEAR(r.loss, (std::log(4.0) + std::log(2.0)) / 2.0, 1e-14);
  EXPECT_NEAR(r.row_loss[1], std::log(2.0), 1e-14);
  EXPECT_EQ(r.row_loss[2], 0.0);
  for (int c = 8; c < 12; ++c) EXPECT_EQ(r.dlogits[c], 0.0) << "a pad row gets no gradient";
  // Gradients of counted rows divide by the non-pad count (2), not by n (3).
  EXPECT_NEAR(r.dlogits[0], 0.25 / 2.0, 1e-15);
}

TEST(RefCrossEntropy, AllPadBatchGivesZeroNotNaN) {
  const std::vector<double> logits = {1, 2, 3, 4, 5, 6};
  const auto r = ref::cross_entropy(logits, std::vector<std::int64_t>{-100, -100}, 3, -100);
  EXPECT_EQ(r.count, 0);
  EXPECT_EQ(r.loss, 0.0);
  for (double g : r.dlogits) EXPECT_EQ(g, 0.0);
}

TEST(RefCrossEntropy, LargeLogitsStayFinite) {
  auto rng = test::case_rng(11);
  const std::int64_t n = 4, vocab = 33;
  const auto logits = test::random_normal(rng, n * vocab, 50.0);
  const auto r = ref::cross_entropy(logits, std::vector<std::int64_t>{0, 5, 32, 17}, vocab, -1);
  EXPECT_TRUE(std::isfinite(r.loss));
  for (double g : r.dlogits) EXPECT_TRUE(std::isfinite(g));
  // Each counted row's gradient sums to zero (softmax sums to one, minus the one-hot).
  for (std::int64_t i = 0; i < n; ++i) {
    double s = 0.0;
    for (std::int64_t c = 0; c < vocab; ++c) s += r.dlogits[i * vocab + c];
    EXPECT_NEAR(s, 0.0, 1e-12);
  }
}

TEST(RefCrossEntropy, OutOfRangeTargetIsAnError) {
  const std::vector<double> logits(6, 0.0);
  try {
    ref::cross_entropy(logits, std::vector<std::int64_t>{1, 3}, 3, -1);
    ADD_FAILURE() << "target 3 of vocab 3 was accepted";
  } catch (const Error& e) {
    EXPECT_STREQ(e.what(), "cross_entropy: targets[1]: expected an index in [0, 3), got 3");
  }
  EXPECT_ERROR_CONTAINS(ref::cross_entropy(logits, std::vector<std::int64_t>{-2, 0}, 3, -1),
                        "cross_entropy: targets[0]");
  EXPECT_NO_THROW(ref::cross_entropy(logits, std::vector<std::int64_t>{-1, 0}, 3, -1));
}

TEST(RefCrossEntropy, GradientMatchesFiniteDifferencesOfMeanLoss) {
  for (std::int64_t vocab : {1, 3, 17}) {
    auto rng = test::case_rng(200 + vocab);
    const std::int64_t n = 4;
    const std::vector<std::int64_t> targets = {0, vocab - 1, 99, vocab / 2};  // 99 is pad
    const auto logits = test::random_normal(rng, n * vocab, 3.0);
    const auto analytic = ref::cross_entropy(logits, targets, vocab, 99).dlogits;
    const auto mean_loss = [&](const std::vector<double>& at) {
      return std::vector<double>{ref::cross_entropy(at, targets, vocab, 99).loss};
    };
    const auto numeric = test::numeric_vjp(mean_loss, logits, {1.0});
    EXPECT_LT(test::max_rel_diff(analytic, numeric), 1e-8) << "vocab " << vocab;
    // Per-row losses agree with the mean.
    const auto r = ref::cross_entropy(logits, targets, vocab, 99);
    EXPECT_NEAR((r.row_loss[0] + r.row_loss[1] + r.row_loss[3]) / 3.0, r.loss, 1e-14);
  }
}

}  // namespace
}  // namespace ignis
