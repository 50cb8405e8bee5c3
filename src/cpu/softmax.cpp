#include "cpu/softmax.h"

#include <algorithm>
#include <cmath>
#include <limits>

namespace ignis::cpu {

void softmax_forward_f32(const float* x, float* y, std::int64_t rows, std::int64_t cols) {
  for (std::int64_t r = 0; r < rows; ++r) {
    const float* in = x + r * cols;
    float* out = y + r * cols;
    float max = -std::numeric_limits<float>::infinity();
    for (std::int64_t c = 0; c < cols; ++c) max = std::max(max, in[c]);
    if (max == -std::numeric_limits<float>::infinity()) {
      std::fill(out, out + cols, 0.0f);
      continue;
    }
    // The sums accumulate in double: a float running sum over a 2M-element row drifts by ~0.3%.
    double sum = 0.0;
    for (std::int64_t c = 0; c < cols; ++c) {
      out[c] = std::exp(in[c] - max);
      sum += out[c];
    }
    const float inv = static_cast<float>(1.0 / sum);
    for (std::int64_t c = 0; c < cols; ++c) out[c] *= inv;
  }
}

void softmax_backward_f32(const float* y, const float* dy, float* dx, std::int64_t rows, std::int64_t cols) {
  for (std::int64_t r = 0; r < rows; ++r) {
    const float* yr = y + r * cols;
    const float* gr = dy + r * cols;
    double dot = 0.0;
    for (std::int64_t c = 0; c < cols; ++c) dot += static_cast<double>(gr[c]) * yr[c];
    const float dot_f = static_cast<float>(dot);
    for (std::int64_t c = 0; c < cols; ++c) dx[r * cols + c] = yr[c] * (gr[c] - dot_f);
  }
}

}  // namespace ignis::cpu
