#pragma once
// Top-p masks of 16-bit logits (bf16, f16) by a histogram of every distinct value: a 16-bit type
// has at most 65536 values, so one counting pass over the row gives the exact weight of every value
// (count x the fixed-point weight of src/ops/sampling_rule.h, the same integers the per-token sums
// of sampling.cu add up), the cut value follows from one scan over the histogram, and only the
// tokens equal to the cut value need their index order. Same masks as the multi-pass path, bit for bit.
#include <cstdint>

#include "ignis/stream.h"
#include "ignis/tensor.h"

namespace ignis::cuda {

// Whether top_p_mask_narrow takes `rows` rows: its workspace is 768 KB a row.
bool top_p_mask_narrow_fits(std::int64_t rows);

// logits, out: [rows, vocab] bf16 or f16, out may alias logits; p_fixed < sampling::kTopPOff.
void top_p_mask_narrow(const Tensor& logits, std::uint64_t p_fixed, const Tensor& out, Stream stream);

}  // namespace ignis::cuda
