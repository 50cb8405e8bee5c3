#include "cpu/norm.h"

#include <cmath>
#include <vector>

namespace ignis::cpu {
namespace {

float rms_rstd(const float* x, std::int64_t dim, float eps) {
  float ss = 0.0f;
  for (std::int64_t c = 0; c < dim; ++c) ss += x[c] * x[c];
  return 1.0f / std::sqrt(ss / static_cast<float>(dim) + eps);
}

struct Moments {
  float mean;
  float rstd;
};

// Two passes (mean, then squared deviations) so a large common offset does not cancel.
Moments moments(const float* x, std::int64_t dim, float eps) {
  float sum = 0.0f;
  for (std::int64_t c = 0; c < dim; ++c) sum += x[c];
  const float mean = sum / static_cast<float>(dim);
  float sq = 0.0f;
  for (std::int64_t c = 0; c < dim; ++c) sq += (x[c] - mean) * (x[c] - mean);
  return {mean, 1.0f / std::sqrt(sq / static_cast<float>(dim) + eps)};
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
  std::vector<float> dw(static_cast<std::size_t>(dim), 0.0f);
  for (std::int64_t r = 0; r < rows; ++r) {
    const float* in = x + r * dim;
    const float* gy = dy + r * dim;
    const float rstd = rms_rstd(in, dim, eps);
    float dot = 0.0f;
    for (std::int64_t c = 0; c < dim; ++c) dot += gy[c] * weight[c] * in[c];
    const float mean_dot = dot * rstd / static_cast<float>(dim);
    for (std::int64_t c = 0; c < dim; ++c) {
      const float xhat = in[c] * rstd;
      dx[r * dim + c] = rstd * (gy[c] * weight[c] - xhat * mean_dot);
      dw[c] += gy[c] * xhat;
    }
  }
  for (std::int64_t c = 0; c < dim; ++c) dweight[c] = dw[c];
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
  std::vector<float> dw(static_cast<std::size_t>(dim), 0.0f), db(static_cast<std::size_t>(dim), 0.0f);
  for (std::int64_t r = 0; r < rows; ++r) {
    const float* in = x + r * dim;
    const float* gy = dy + r * dim;
    const Moments m = moments(in, dim, eps);
    float sum_g = 0.0f, dot = 0.0f;
    for (std::int64_t c = 0; c < dim; ++c) {
      const float g = gy[c] * weight[c];
      sum_g += g;
      dot += g * (in[c] - m.mean) * m.rstd;
    }
    const float mean_g = sum_g / static_cast<float>(dim);
    const float mean_dot = dot / static_cast<float>(dim);
    for (std::int64_t c = 0; c < dim; ++c) {
      const float xhat = (in[c] - m.mean) * m.rstd;
      dx[r * dim + c] = m.rstd * (gy[c] * weight[c] - mean_g - xhat * mean_dot);
      dw[c] += gy[c] * xhat;
      db[c] += gy[c];
    }
  }
  for (std::int64_t c = 0; c < dim; ++c) {
    dweight[c] = dw[c];
    dbias[c] = db[c];
  }
}

}  // namespace ignis::cpu
