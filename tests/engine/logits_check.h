#pragma once
// Helpers of the engine tests that compare model logits with an fp64 reference.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <random>
#include <span>
#include <vector>

#include "engine/causal_lm.h"
#include "harness/max_error.h"

namespace ignis::test {

// f32 activations over a handful of layers: a few hundred ulps of the logit scale.
constexpr double kF32Tol = 2e-5;

// n ids drawn uniformly from [0, vocab).
inline std::vector<std::int32_t> some_tokens(std::int64_t n, std::int64_t vocab, std::uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::vector<std::int32_t> t(static_cast<std::size_t>(n));
  for (auto& id : t) id = static_cast<std::int32_t>(rng() % static_cast<std::uint64_t>(vocab));
  return t;
}

// Largest |got - want| over one logits row, relative to the row's largest |want| (at least 1); infinite
// where any logit is NaN.
// want: std::vector<double> (an fp64 reference) or std::span<const float> (another engine's row).
template <class Want>
double row_error(std::span<const float> got, const Want& want) {
  double scale = 1.0;
  for (const auto w : want) scale = std::max(scale, std::abs(static_cast<double>(w)));
  return max_abs_error(got, want) / scale;
}

// One prefill of `tokens` in a fresh cache: every position's logits against want[position].
inline void expect_all_logits_match(engine::CausalLm& model, const std::vector<std::int32_t>& tokens,
                                    const std::vector<std::vector<double>>& want, double tol) {
  engine::KvCache cache = model.make_cache();
  const auto logits = model.forward(tokens, cache, /*all_logits=*/true);
  const std::size_t vocab = static_cast<std::size_t>(model.vocab_size());
  ASSERT_EQ(logits.size(), tokens.size() * vocab);
  for (std::size_t t = 0; t < tokens.size(); ++t)
    EXPECT_LT(row_error(logits.subspan(t * vocab, vocab), want[t]), tol) << "position " << t;
  EXPECT_EQ(cache.length(), static_cast<std::int64_t>(tokens.size()));
}

}  // namespace ignis::test
