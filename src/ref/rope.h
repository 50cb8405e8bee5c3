#pragma once
// Reference rotary position embedding: inverse frequencies of each scaling scheme and the
// rotation itself, plain loops in double precision.
#include <cstdint>
#include <span>
#include <vector>

#include "ignis/ops/rope.h"

namespace ignis::ref {

// inv_freq: [rotary_dim / 2], the formulas documented in ignis/ops/rope.h, in double.
std::vector<double> rope_inv_freq(std::int64_t rotary_dim, double theta, const RopeScaling& scaling);
// 0.1 * ln(factor) + 1 for yarn with factor > 1, else 1.
double rope_attention_factor(const RopeScaling& scaling);

struct RopeDims {
  std::int64_t batch = 1, seqlen = 1, heads = 1, head_dim = 2, rotary_dim = 2;
  bool interleaved = false;  // pairs (2i, 2i+1) instead of (i, i + rotary_dim/2)
};

// x: [batch, seqlen, heads, head_dim]; inv_freq: [rotary_dim / 2]; start: [batch], the position
// of each sequence's token 0. Pair (a, b) of token s of sequence b is rotated by
// t = (start[b] + s) * inv_freq[i]: f * (a cos t - b sin t, b cos t + a sin t), with sin t
// negated when sign = -1 (the backward). Returns [batch, seqlen, heads, head_dim].
std::vector<double> rope_apply(std::span<const double> x, std::span<const double> inv_freq, const RopeDims& dims,
                               std::span<const std::int64_t> start, double attention_factor, int sign);

}  // namespace ignis::ref
