#pragma once
// The engine's CPU softmax: fp32 storage, fp32 accumulation.
#include <cstdint>

namespace ignis::cpu {

// x, y: [rows, cols] contiguous.
void softmax_forward_f32(const float* x, float* y, std::int64_t rows, std::int64_t cols);
// y, dy, dx: [rows, cols] contiguous.
void softmax_backward_f32(const float* y, const float* dy, float* dx, std::int64_t rows, std::int64_t cols);

}  // namespace ignis::cpu
