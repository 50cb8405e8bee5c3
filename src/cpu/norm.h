#pragma once
// The engine's CPU RMSNorm and LayerNorm: fp32 storage and arithmetic, sums accumulated in
// double (see norm.cpp). Backward passes
// recompute the row statistics from x, as the CUDA kernels do.
#include <cstdint>

namespace ignis::cpu {

// x, y: [rows, dim], weight: [dim], all contiguous.
void rmsnorm_forward_f32(const float* x, const float* weight, float* y, std::int64_t rows, std::int64_t dim,
                         float eps);
// x, dy, dx: [rows, dim], weight, dweight: [dim].
void rmsnorm_backward_f32(const float* x, const float* weight, const float* dy, float* dx, float* dweight,
                          std::int64_t rows, std::int64_t dim, float eps);

// x, y: [rows, dim], weight, bias: [dim].
void layernorm_forward_f32(const float* x, const float* weight, const float* bias, float* y, std::int64_t rows,
                           std::int64_t dim, float eps);
// x, dy, dx: [rows, dim], weight, dweight, dbias: [dim].
void layernorm_backward_f32(const float* x, const float* weight, const float* dy, float* dx, float* dweight,
                            float* dbias, std::int64_t rows, std::int64_t dim, float eps);

}  // namespace ignis::cpu
