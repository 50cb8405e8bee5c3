#pragma once
// CUDA sampling launchers. Arguments are validated by the dispatcher in src/ops/sampling.cpp.
#include <cstdint>

#include "ignis/stream.h"
#include "ignis/tensor.h"
#include "ops/sampling_rule.h"

namespace ignis::cuda {

// logits, out: [rows, vocab] contiguous, f32, f16 or bf16; out may alias logits. k = 0 keeps all.
void top_k_mask(const Tensor& logits, std::int64_t k, const Tensor& out, Stream stream);
// p_fixed = sampling::top_p_fixed(p); kTopPOff keeps all.
void top_p_mask(const Tensor& logits, std::uint64_t p_fixed, const Tensor& out, Stream stream);
// logits: [rows, vocab]; ids: [rows] i32.
void sample(const Tensor& logits, const sampling::Plan& plan, const Tensor& ids, Stream stream);

}  // namespace ignis::cuda
