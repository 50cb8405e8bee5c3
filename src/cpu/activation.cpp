#include "cpu/activation.h"

#include <cmath>

namespace ignis::cpu {
namespace {

constexpr float kGeluScale = 0.7978845608028654f;  // sqrt(2 / pi)
constexpr float kGeluCubic = 0.044715f;

// exp(-x) overflows to inf for x < -88, and 1 / inf = 0 is the right limit.
float sigmoid(float x) { return 1.0f / (1.0f + std::exp(-x)); }

float silu_grad(float x) {
  const float s = sigmoid(x);
  return s * (1.0f + x * (1.0f - s));
}

}  // namespace

void gelu_tanh_forward_f32(const float* x, float* y, std::int64_t n) {
  for (std::int64_t i = 0; i < n; ++i) {
    const float v = x[i];
    y[i] = 0.5f * v * (1.0f + std::tanh(kGeluScale * v * (1.0f + kGeluCubic * v * v)));
  }
}

void gelu_tanh_backward_f32(const float* x, const float* dy, float* dx, std::int64_t n) {
  for (std::int64_t i = 0; i < n; ++i) {
    const float v = x[i];
    const float t = std::tanh(kGeluScale * v * (1.0f + kGeluCubic * v * v));
    const float sech2 = 1.0f - t * t;
    // A saturated tanh has sech2 = 0; skipping the term avoids 0 * inf when v * v overflows.
    const float slope = sech2 == 0.0f ? 0.0f : 0.5f * v * sech2 * kGeluScale * (1.0f + 3.0f * kGeluCubic * v * v);
    dx[i] = dy[i] * (0.5f * (1.0f + t) + slope);
  }
}

void silu_forward_f32(const float* x, float* y, std::int64_t n) {
  for (std::int64_t i = 0; i < n; ++i) y[i] = x[i] * sigmoid(x[i]);
}

void silu_backward_f32(const float* x, const float* dy, float* dx, std::int64_t n) {
  for (std::int64_t i = 0; i < n; ++i) dx[i] = dy[i] * silu_grad(x[i]);
}

void swiglu_forward_f32(const float* gate, const float* up, float* out, std::int64_t n) {
  for (std::int64_t i = 0; i < n; ++i) out[i] = gate[i] * sigmoid(gate[i]) * up[i];
}

void swiglu_backward_f32(const float* gate, const float* up, const float* dout, float* dgate, float* dup,
                         std::int64_t n) {
  for (std::int64_t i = 0; i < n; ++i) {
    const float g = gate[i];
    const float s = sigmoid(g);
    dgate[i] = dout[i] * up[i] * s * (1.0f + g * (1.0f - s));
    dup[i] = dout[i] * g * s;
  }
}

}  // namespace ignis::cpu
