#include "cpu/norm.h"

#include <cmath>
#include <vector>

namespace ignis::cpu {
namespace {

// Row sums and the sums over rows accumulate in double: a sequential fp32 sum (the CPU has no
// reduction tree) loses about sqrt(n) ulps over n terms, which long rows would notice.
// x: [dim], one row.
float rms_rstd(const float* x, std::int64_t dim, float eps) {
  double ss = 0.0;
  for (std::int64_t c = 0; c < dim; ++c) ss += x[c] * x[c];
  return static_cast<float>(1.0 / std::sqrt(ss / static_cast<double>(dim) + eps));
}

struct Moments {
  float mean;
  float rstd;
};

// Two passes (mean, then squared deviations) so a large common offset does not cancel.
// x: [dim], one row.
Moments moments(const float* x, std::int64_t dim, float eps) {
  double sum = 0.0;
  for (std::int64_t c = 0; c < dim; ++c) sum += x[c];
  const double mean = sum / static_cast<double>(dim);
  double sq = 0.0;
  for (std::int64_t c = 0; c < dim; ++c) sq += (x[c] - mean) * (x[c] - mean);
  return {static_cast<float>(mean), static_cast<float>(1.0 / std::sqrt(sq / static_cast<double>(dim) + eps))};
}

}  // namespace

void rmsnorm_forward_f32(const float* x, const float* weight, float* y, std::int64_t rows, std::int64_t dim,
                         float eps) {
  for (std::int64_t r = 0; r < rows; ++r) {
    const float* in = x + r * dim;
    const float rstd = rms_rstd(in, dim, eps);
    for (std::int64_t c = 0; c < dim; ++c) y[r * dim + c] = in[c] * rstd * weight[c];
  }
}

void rmsnorm_backward_f32(const float* x, const float* weight, const float* dy, float* dx, float* dweight,
                          std::int64_t rows, std::int64_t dim, float eps) {
  std::vector<double> dw(static_cast<std::size_t>(dim), 0.0);
  for (std::int64_t r = 0; r < rows; ++r) {
    const float* in = x + r * dim;
    const float* gy = dy + r * dim;
    const float rstd = rms_rstd(in, dim, eps);
    double dot = 0.0;
    for (std::int64_t c = 0; c < dim; ++c) dot += gy[c] * weight[c] * in[c];
    const float mean_dot = static_cast<float>(dot * rstd / static_cast<double>(dim));
    for (std::int64_t c = 0; c < dim; ++c) {
      const float xhat = in[c] * rstd;
      dx[r * dim + c] = rstd * (gy[c] * weight[c] - xhat * mean_dot);
      dw[c] += gy[c] * xhat;
    }
  }
  for (std::int64_t c = 0; c < dim; ++c) dweight[c] = static_cast<float>(dw[c]);
}

void layernorm_forward_f32(const float* x, const float* weight, const float* bias, float* y, std::int64_t rows,
                           std::int64_t dim, float eps) {
  for (std::int64_t r = 0; r < rows; ++r) {
    const float* in = x + r * dim;
    const Moments m = moments(in, dim, eps);
    for (std::int64_t c = 0; c < dim; ++c) y[r * dim + c] = (in[c] - m.mean) * m.rstd * weight[c] + bias[c];
  }
}

void layernorm_backward_f32(const float* x, const float* weight, const float* dy, float* dx, float* dweight,
                            float* dbias, std::int64_t rows, std::int64_t dim, float eps) {
  std::vector<double> dw(static_cast<std::size_t>(dim), 0.0), db(static_cast<std::size_t>(dim), 0.0);
  for (std::int64_t r = 0; r < rows; ++r) {
    const float* in = x + r * dim;
    const float* gy = dy + r * dim;
    const Moments m = moments(in, dim, eps);
    double sum_g = 0.0, dot = 0.0;
    for (std::int64_t c = 0; c < dim; ++c) {
      const float g = gy[c] * weight[c];
      sum_g += g;
      dot += g * (in[c] - m.mean) * m.rstd;
    }
    const float mean_g = static_cast<float>(sum_g / static_cast<double>(dim));
    const float mean_dot = static_cast<float>(dot / static_cast<double>(dim));
    for (std::int64_t c = 0; c < dim; ++c) {
      const float xhat = (in[c] - m.mean) * m.rstd;
      dx[r * dim + c] = m.rstd * (gy[c] * weight[c] - mean_g - xhat * mean_dot);
      dw[c] += gy[c] * xhat;
      db[c] += gy[c];
    }
  }
  for (std::int64_t c = 0; c < dim; ++c) {
    dweight[c] = static_cast<float>(dw[c]);
    dbias[c] = static_cast<float>(db[c]);
  }
}

}  // namespace ignis::cpu
