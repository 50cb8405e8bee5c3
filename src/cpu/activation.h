#pragma once
// The engine's CPU activations: fp32, element-wise over n contiguous elements.
#include <cstdint>

namespace ignis::cpu {

// x, y: [n].
void gelu_tanh_forward_f32(const float* x, float* y, std::int64_t n);
// x, dy, dx: [n].
void gelu_tanh_backward_f32(const float* x, const float* dy, float* dx, std::int64_t n);
// x, y: [n].
void silu_forward_f32(const float* x, float* y, std::int64_t n);
// x, dy, dx: [n].
void silu_backward_f32(const float* x, const float* dy, float* dx, std::int64_t n);
// gate, up, out: [n].
void swiglu_forward_f32(const float* gate, const float* up, float* out, std::int64_t n);
// gate, up, dout, dgate, dup: [n].
void swiglu_backward_f32(const float* gate, const float* up, const float* dout, float* dgate, float* dup,
                         std::int64_t n);

}  // namespace ignis::cpu
