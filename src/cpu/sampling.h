#pragma once
// The engine's CPU sampling: fp32 logits, the fixed-point rule of src/ops/sampling_rule.h, so the
// ids equal those of the CUDA kernels exactly.
#include <cstdint>

#include "ops/sampling_rule.h"

namespace ignis::cpu {

// x, y: [rows, vocab] contiguous; k in [1, vocab) (the dispatcher handles "keep all").
void top_k_mask_f32(const float* x, float* y, std::int64_t rows, std::int64_t vocab, std::int64_t k);
// x, y: [rows, vocab]; p_fixed = sampling::top_p_fixed(p) < 2^32.
void top_p_mask_f32(const float* x, float* y, std::int64_t rows, std::int64_t vocab, std::uint64_t p_fixed);
// logits: [rows, vocab]; ids: [rows].
void sample_f32(const float* logits, std::int32_t* ids, std::int64_t rows, std::int64_t vocab,
                const sampling::Plan& plan);

}  // namespace ignis::cpu
