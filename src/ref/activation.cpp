#include "ref/activation.h"

#include <cmath>
#include <numbers>

namespace ignis::ref {
namespace {

const double kGeluScale = std::sqrt(2.0 / std::numbers::pi);
constexpr double kGeluCubic = 0.044715;

// 1 / (1 + e^-x) without overflow: for x < 0 it is written e^x / (1 + e^x).
double sigmoid(double x) {
  if (x >= 0.0) return 1.0 / (1.0 + std::exp(-x));
  const double e = std::exp(x);
  return e / (1.0 + e);
}

double silu(double x) { return x * sigmoid(x); }

// d/dx x s(x) = s (1 + x (1 - s)).
double silu_grad(double x) {
  const double s = sigmoid(x);
  return s * (1.0 + x * (1.0 - s));
}

}  // namespace

std::vector<double> gelu_tanh_forward(std::span<const double> x) {
  std::vector<double> y(x.size());
  for (std::size_t i = 0; i < x.size(); ++i) {
    const double v = x[i];
    y[i] = 0.5 * v * (1.0 + std::tanh(kGeluScale * (v + kGeluCubic * v * v * v)));
  }
  return y;
}

// gelu'(x) = 0.5 (1 + t) + 0.5 x (1 - t^2) sqrt(2/pi) (1 + 3 * 0.044715 x^2), t = tanh(...).
// Where tanh has saturated (1 - t^2 = 0) the second term is 0 even if x^2 overflowed.
std::vector<double> gelu_tanh_backward(std::span<const double> x, std::span<const double> dy) {
  std::vector<double> dx(x.size());
  for (std::size_t i = 0; i < x.size(); ++i) {
    const double v = x[i];
    const double t = std::tanh(kGeluScale * (v + kGeluCubic * v * v * v));
    const double sech2 = 1.0 - t * t;
    const double slope = sech2 == 0.0 ? 0.0 : 0.5 * v * sech2 * kGeluScale * (1.0 + 3.0 * kGeluCubic * v * v);
    dx[i] = dy[i] * (0.5 * (1.0 + t) + slope);
  }
  return dx;
}

std::vector<double> silu_forward(std::span<const double> x) {
  std::vector<double> y(x.size());
  for (std::size_t i = 0; i < x.size(); ++i) y[i] = silu(x[i]);
  return y;
}

std::vector<double> silu_backward(std::span<const double> x, std::span<const double> dy) {
  std::vector<double> dx(x.size());
  for (std::size_t i = 0; i < x.size(); ++i) dx[i] = dy[i] * silu_grad(x[i]);
  return dx;
}

std::vector<double> swiglu_forward(std::span<const double> gate, std::span<const double> up) {
  std::vector<double> out(gate.size());
  for (std::size_t i = 0; i < gate.size(); ++i) out[i] = silu(gate[i]) * up[i];
  return out;
}

SwiGluGrads swiglu_backward(std::span<const double> gate, std::span<const double> up, std::span<const double> dout) {
  SwiGluGrads grads{std::vector<double>(gate.size()), std::vector<double>(gate.size())};
  for (std::size_t i = 0; i < gate.size(); ++i) {
    grads.dgate[i] = dout[i] * up[i] * silu_grad(gate[i]);
    grads.dup[i] = dout[i] * silu(gate[i]);
  }
  return grads;
}

}  // namespace ignis::ref
