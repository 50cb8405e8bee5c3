#pragma once
// Reference sampling over logits [rows, vocab]: plain loops in double precision.
//
// Order: tokens are ranked by logit, larger first; equal logits rank lower index first
// (-0 equals +0). Temperature does not change this order, so every rule below uses it.
// top-k: keep the first k tokens of that order, i.e. every value above the k-th largest, then
//   the lowest-index tokens equal to it until exactly k survive. k <= 0 or k >= vocab keeps all.
// top-p: p = softmax(row); keep the shortest prefix of the order whose cumulative p reaches
//   p_keep * total (always at least one token). p_keep >= 1, or a row without a finite logit,
//   keeps all.
// sample: T == 0 gives the argmax (lowest index among equal maxima). Otherwise y = x / T, then
//   top-k, then top-p, then probabilities q = softmax(y); u = (random_bits(seed, step, row) >> 11)
//   * 2^-53 (src/ops/sampling_rule.h); the id is the first index, in index order, whose inclusive
//   cumulative q exceeds u * sum(q). A row without a finite logit gives its argmax.
// The implementations compute the same rule on fixed-point weights (sampling_rule.h), so they can
// disagree with this reference only when u * sum(q), or the top-p target, lies within ~4e-9 of the
// total of a cumulative boundary (vocab <= 2^18; see sampling_rule.h). `margin` reports that distance, relative to the
// row total, so tests can set such draws aside instead of accepting a tolerance on ids.
#include <cstdint>
#include <span>
#include <vector>

#include "ignis/ops/sampling.h"

namespace ignis::ref {

// x: [rows, vocab] -> [rows, vocab], masked entries -inf.
std::vector<double> top_k_mask(std::span<const double> x, std::int64_t rows, std::int64_t vocab, std::int64_t k);

struct TopPMask {
  std::vector<double> masked;  // [rows, vocab], masked entries -inf
  std::vector<double> margin;  // [rows]: distance of p_keep * total from the nearest cumulative boundary / total
};
// x: [rows, vocab].
TopPMask top_p_mask(std::span<const double> x, std::int64_t rows, std::int64_t vocab, double p);

// The uniform draw u in [0, 1) of one (seed, step, row).
double sampling_uniform(std::uint64_t seed, std::uint64_t step, std::uint64_t row);

struct Samples {
  std::vector<std::int32_t> ids;  // [rows]
  std::vector<double> margin;     // [rows]: smallest relative distance from a decision boundary (inf: greedy)
};
// logits: [rows, vocab].
Samples sample(std::span<const double> logits, std::int64_t rows, std::int64_t vocab, const SamplingParams& params);

}  // namespace ignis::ref
