#pragma once
// Helpers of the engine tests that compare model logits with an fp64 reference.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <random>
#include <span>
#include <vector>

namespace ignis::test {

// n ids drawn uniformly from [0, vocab).
inline std::vector<std::int32_t> some_tokens(std::int64_t n, std::int64_t vocab, std::uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::vector<std::int32_t> t(static_cast<std::size_t>(n));
  for (auto& id : t) id = static_cast<std::int32_t>(rng() % static_cast<std::uint64_t>(vocab));
  return t;
}

// Largest |got - want| over one logits row, relative to the row's largest |want| (at least 1).
inline double row_error(std::span<const float> got, const std::vector<double>& want) {
  double scale = 1.0, err = 0.0;
  for (double w : want) scale = std::max(scale, std::abs(w));
  for (std::size_t i = 0; i < want.size(); ++i) err = std::max(err, std::abs(static_cast<double>(got[i]) - want[i]));
  return err / scale;
}

}  // namespace ignis::test
