#include "ref/sampling.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>

#include "ops/sampling_rule.h"

namespace ignis::ref {
namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();

// Indices of one row in rank order: larger logit first, lower index first among equals.
// row: [n].
std::vector<std::int64_t> rank_order(const double* row, std::int64_t n) {
  std::vector<std::int64_t> order(n);
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [row](std::int64_t a, std::int64_t b) { return row[a] > row[b]; });
  return order;
}

// row: [n].
std::int64_t argmax(const double* row, std::int64_t n) {
  std::int64_t best = 0;
  for (std::int64_t i = 1; i < n; ++i)
    if (row[i] > row[best]) best = i;
  return best;
}

// row: [n], masked in place.
void keep_top_k(double* row, std::int64_t n, std::int64_t k) {
  if (k <= 0 || k >= n) return;
  const auto order = rank_order(row, n);
  for (std::int64_t r = k; r < n; ++r) row[order[r]] = -kInf;
}

// Masks the row in place; returns the margin of the top-p boundary (inf when nothing is cut).
// row: [n].
double keep_top_p(double* row, std::int64_t n, double p) {
  const double max = row[argmax(row, n)];
  if (p >= 1.0 || max == -kInf) return kInf;
  std::vector<double> prob(n);
  double total = 0.0;
  for (std::int64_t i = 0; i < n; ++i) total += prob[i] = std::exp(row[i] - max);
  const auto order = rank_order(row, n);
  const double target = p * total;
  double before = 0.0;
  std::int64_t kept = 0;
  while (kept < n) {
    const double through = before + prob[order[kept]];
    ++kept;
    if (through >= target) {
      const double margin = std::min(target - before, through - target) / total;
      for (std::int64_t r = kept; r < n; ++r) row[order[r]] = -kInf;
      return margin;
    }
    before = through;
  }
  return 0.0;  // rounding kept the target out of reach: every token survives, an ambiguous case
}

}  // namespace

std::vector<double> top_k_mask(std::span<const double> x, std::int64_t rows, std::int64_t vocab, std::int64_t k) {
  std::vector<double> y(x.begin(), x.end());
  for (std::int64_t r = 0; r < rows; ++r) keep_top_k(y.data() + r * vocab, vocab, k);
  return y;
}

TopPMask top_p_mask(std::span<const double> x, std::int64_t rows, std::int64_t vocab, double p) {
  TopPMask out{std::vector<double>(x.begin(), x.end()), std::vector<double>(rows)};
  for (std::int64_t r = 0; r < rows; ++r) out.margin[r] = keep_top_p(out.masked.data() + r * vocab, vocab, p);
  return out;
}

double sampling_uniform(std::uint64_t seed, std::uint64_t step, std::uint64_t row) {
  return static_cast<double>(sampling::random_bits(seed, step, row) >> 11) * 0x1p-53;
}

Samples sample(std::span<const double> logits, std::int64_t rows, std::int64_t vocab, const SamplingParams& params) {
  Samples out{std::vector<std::int32_t>(rows), std::vector<double>(rows, kInf)};
  std::vector<double> y(vocab);
  for (std::int64_t r = 0; r < rows; ++r) {
    const double* x = logits.data() + r * vocab;
    const auto fallback = static_cast<std::int32_t>(argmax(x, vocab));
    out.ids[r] = fallback;
    if (params.temperature == 0.0 || x[fallback] == -kInf) continue;
    for (std::int64_t i = 0; i < vocab; ++i) y[i] = x[i] / params.temperature;
    keep_top_k(y.data(), vocab, params.top_k);
    const double margin_p = keep_top_p(y.data(), vocab, params.top_p);
    const double max = y[argmax(y.data(), vocab)];
    double total = 0.0;
    for (std::int64_t i = 0; i < vocab; ++i) total += std::exp(y[i] - max);
    const double threshold = sampling_uniform(params.seed, params.step, r) * total;
    double cum = 0.0;
    for (std::int64_t i = 0; i < vocab; ++i) {
      const double next = cum + std::exp(y[i] - max);
      if (next > threshold) {
        out.ids[r] = static_cast<std::int32_t>(i);
        out.margin[r] = std::min(margin_p, std::min(threshold - cum, next - threshold) / total);
        break;
      }
      cum = next;
    }
  }
  return out;
}

}  // namespace ignis::ref
