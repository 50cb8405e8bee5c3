#include "ref/norm.h"

#include <cmath>

namespace ignis::ref {
namespace {

// 1 / sqrt(mean(x^2) + eps) of one row. x: [dim].
double rms_rstd(const double* x, std::int64_t dim, double eps) {
  double ss = 0.0;
  for (std::int64_t c = 0; c < dim; ++c) ss += x[c] * x[c];
  return 1.0 / std::sqrt(ss / static_cast<double>(dim) + eps);
}

struct Moments {
  double mean;
  double rstd;  // 1 / sqrt(biased variance + eps)
};

// x: [dim], one row.
Moments moments(const double* x, std::int64_t dim, double eps) {
  double sum = 0.0;
  for (std::int64_t c = 0; c < dim; ++c) sum += x[c];
  const double mean = sum / static_cast<double>(dim);
  double sq = 0.0;
  for (std::int64_t c = 0; c < dim; ++c) sq += (x[c] - mean) * (x[c] - mean);
  return {mean, 1.0 / std::sqrt(sq / static_cast<double>(dim) + eps)};
}

}  // namespace

std::vector<double> rmsnorm_forward(std::span<const double> x, std::span<const double> weight, std::int64_t rows,
                                    std::int64_t dim, double eps) {
  std::vector<double> y(x.size());
  for (std::int64_t r = 0; r < rows; ++r) {
    const double* in = x.data() + r * dim;
    const double rstd = rms_rstd(in, dim, eps);
    for (std::int64_t c = 0; c < dim; ++c) y[r * dim + c] = in[c] * rstd * weight[c];
  }
  return y;
}

// With xhat = x * rstd and g = dy * weight: dx = rstd * (g - xhat * mean(g * xhat)),
// dweight = sum over rows of dy * xhat.
RmsNormGrads rmsnorm_backward(std::span<const double> x, std::span<const double> weight, std::span<const double> dy,
                              std::int64_t rows, std::int64_t dim, double eps) {
  RmsNormGrads grads{std::vector<double>(x.size()), std::vector<double>(weight.size(), 0.0)};
  for (std::int64_t r = 0; r < rows; ++r) {
    const double* in = x.data() + r * dim;
    const double* gy = dy.data() + r * dim;
    const double rstd = rms_rstd(in, dim, eps);
    double dot = 0.0;
    for (std::int64_t c = 0; c < dim; ++c) dot += gy[c] * weight[c] * in[c] * rstd;
    const double mean_dot = dot / static_cast<double>(dim);
    for (std::int64_t c = 0; c < dim; ++c) {
      const double xhat = in[c] * rstd;
      grads.dx[r * dim + c] = rstd * (gy[c] * weight[c] - xhat * mean_dot);
      grads.dweight[c] += gy[c] * xhat;
    }
  }
  return grads;
}

std::vector<double> layernorm_forward(std::span<const double> x, std::span<const double> weight,
                                      std::span<const double> bias, std::int64_t rows, std::int64_t dim, double eps) {
  std::vector<double> y(x.size());
  for (std::int64_t r = 0; r < rows; ++r) {
    const double* in = x.data() + r * dim;
    const Moments m = moments(in, dim, eps);
    for (std::int64_t c = 0; c < dim; ++c) y[r * dim + c] = (in[c] - m.mean) * m.rstd * weight[c] + bias[c];
  }
  return y;
}

// With xhat = (x - mean) * rstd and g = dy * weight:
// dx = rstd * (g - mean(g) - xhat * mean(g * xhat)), dweight = sum dy * xhat, dbias = sum dy.
LayerNormGrads layernorm_backward(std::span<const double> x, std::span<const double> weight,
                                  std::span<const double> dy, std::int64_t rows, std::int64_t dim, double eps) {
  LayerNormGrads grads{std::vector<double>(x.size()), std::vector<double>(weight.size(), 0.0),
                       std::vector<double>(weight.size(), 0.0)};
  for (std::int64_t r = 0; r < rows; ++r) {
    const double* in = x.data() + r * dim;
    const double* gy = dy.data() + r * dim;
    const Moments m = moments(in, dim, eps);
    double sum_g = 0.0, dot = 0.0;
    for (std::int64_t c = 0; c < dim; ++c) {
      const double g = gy[c] * weight[c];
      sum_g += g;
      dot += g * (in[c] - m.mean) * m.rstd;
    }
    const double mean_g = sum_g / static_cast<double>(dim);
    const double mean_dot = dot / static_cast<double>(dim);
    for (std::int64_t c = 0; c < dim; ++c) {
      const double xhat = (in[c] - m.mean) * m.rstd;
      grads.dx[r * dim + c] = m.rstd * (gy[c] * weight[c] - mean_g - xhat * mean_dot);
      grads.dweight[c] += gy[c] * xhat;
      grads.dbias[c] += gy[c];
    }
  }
  return grads;
}

}  // namespace ignis::ref
