#pragma once
// Reference RMSNorm and LayerNorm over the last dimension: plain loops in double precision.
// Both normalise each row of x: [rows, dim] and scale it by weight: [dim] (LayerNorm also adds
// bias: [dim]). The backward passes recompute the row statistics from x.
#include <cstdint>
#include <span>
#include <vector>

namespace ignis::ref {

// y = x / sqrt(mean(x^2) + eps) * weight (Llama). x: [rows, dim], weight: [dim] -> y: [rows, dim].
std::vector<double> rmsnorm_forward(std::span<const double> x, std::span<const double> weight, std::int64_t rows,
                                    std::int64_t dim, double eps);

struct RmsNormGrads {
  std::vector<double> dx;       // [rows, dim]
  std::vector<double> dweight;  // [dim]
};
// x, dy: [rows, dim], weight: [dim].
RmsNormGrads rmsnorm_backward(std::span<const double> x, std::span<const double> weight, std::span<const double> dy,
                              std::int64_t rows, std::int64_t dim, double eps);

// y = (x - mean) / sqrt(var + eps) * weight + bias, var biased (divided by dim, as torch).
// x: [rows, dim], weight, bias: [dim] -> y: [rows, dim].
std::vector<double> layernorm_forward(std::span<const double> x, std::span<const double> weight,
                                      std::span<const double> bias, std::int64_t rows, std::int64_t dim, double eps);

struct LayerNormGrads {
  std::vector<double> dx;       // [rows, dim]
  std::vector<double> dweight;  // [dim]
  std::vector<double> dbias;    // [dim]
};
// x, dy: [rows, dim], weight: [dim]. The bias does not enter the gradients.
LayerNormGrads layernorm_backward(std::span<const double> x, std::span<const double> weight,
                                  std::span<const double> dy, std::int64_t rows, std::int64_t dim, double eps);

}  // namespace ignis::ref
