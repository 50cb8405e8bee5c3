#pragma once
// Token sampling over logits: temperature, top-k and top-p (nucleus) masks, and a seeded
// categorical draw that gives the same ids on the CPU and on CUDA.
#include <cstdint>

#include "ignis/stream.h"
#include "ignis/tensor.h"

namespace ignis {

struct SamplingParams {
  double temperature = 1.0;  // finite, >= 0; 0 means greedy (argmax, lowest index among equal maxima)
  std::int64_t top_k = 0;    // >= 0; 0 or >= vocab keeps every token
  double top_p = 1.0;        // in (0, 1]; 1 keeps every token
  std::uint64_t seed = 0;
  std::uint64_t step = 0;  // the decode step: one (seed, step, row) gives one uniform draw
};

// Logits are ordered by value, ties by lower index first (-0 equals +0).
// top-k keeps exactly min(k, vocab) tokens: values above the k-th largest, then the lowest-index
// tokens equal to it. top-p keeps the shortest prefix of that order whose softmax mass reaches p
// (always at least one token); a row without finite logits is left unchanged.
// sample: temperature, then top-k, then top-p on the tempered softmax of the survivors, then the
// first index (in index order) whose inclusive cumulative weight exceeds u * total, with
// u = (random_bits(seed, step, row) >> 11) * 2^-53 (src/ops/sampling_rule.h). Weights are
// fixed-point integers, so every implementation returns the same ids. A row without a finite
// logit returns its argmax. NaN or +inf logits give an unspecified id within [0, vocab).
// logits, out: [rows, vocab], same dtype and device, contiguous; ids: [rows] i32.
bool sampling_supported(Device device, DType dtype);
void top_k_mask(const Tensor& logits, std::int64_t k, const Tensor& out, Stream stream = {});
void top_p_mask(const Tensor& logits, double p, const Tensor& out, Stream stream = {});
void sample(const Tensor& logits, const SamplingParams& params, const Tensor& ids, Stream stream = {});

}  // namespace ignis
