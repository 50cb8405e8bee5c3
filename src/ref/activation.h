#pragma once
// Reference activations, element-wise, in double precision: GELU (tanh form, GPT-2's gelu_new),
// SiLU and SwiGLU. Every input and output below has the same length n (any shape, flattened).
#include <span>
#include <vector>

namespace ignis::ref {

// y = 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))). x: [n] -> y: [n].
std::vector<double> gelu_tanh_forward(std::span<const double> x);
// x, dy: [n] -> dx = dy * gelu'(x): [n].
std::vector<double> gelu_tanh_backward(std::span<const double> x, std::span<const double> dy);

// y = x * sigmoid(x). x: [n] -> y: [n].
std::vector<double> silu_forward(std::span<const double> x);
// x, dy: [n] -> dx = dy * silu'(x): [n].
std::vector<double> silu_backward(std::span<const double> x, std::span<const double> dy);

// out = silu(gate) * up. gate, up: [n] (e.g. [rows, dim] flattened) -> out: [n].
std::vector<double> swiglu_forward(std::span<const double> gate, std::span<const double> up);

struct SwiGluGrads {
  std::vector<double> dgate;  // [n]
  std::vector<double> dup;    // [n]
};
// gate, up, dout: [n].
SwiGluGrads swiglu_backward(std::span<const double> gate, std::span<const double> up, std::span<const double> dout);

}  // namespace ignis::ref
