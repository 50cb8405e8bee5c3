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
    float sum = 0.0f;
    for (std::int64_t c = 0; c < cols; ++c) {
      out[c] = std::exp(in[c] - max);
      sum += out[c];
    }
    const float inv = 1.0f / sum;
    for (std::int64_t c = 0; c < cols; ++c) out[c] *= inv;
  }
}

void softmax_backward_f32(const float* y, const float* dy, float* dx, std::int64_t rows, std::int64_t cols) {
  for (std::int64_t r = 0; r < rows; ++r) {
    const float* yr = y + r * cols;
    const float* gr = dy + r * cols;
    float dot = 0.0f;
    for (std::int64_t c = 0; c < cols; ++c) dot += gr[c] * yr[c];
    for (std::int64_t c = 0; c < cols; ++c) dx[r * cols + c] = yr[c] * (gr[c] - dot);
  }
}

}  // namespace ignis::cpu
