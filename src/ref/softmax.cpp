#include "ref/softmax.h"

#include <cmath>
#include <limits>

namespace ignis::ref {

std::vector<double> softmax_forward(std::span<const double> x, std::int64_t rows, std::int64_t cols) {
  std::vector<double> y(x.size());
  for (std::int64_t r = 0; r < rows; ++r) {
    const double* in = x.data() + r * cols;
    double* out = y.data() + r * cols;
    double max = -std::numeric_limits<double>::infinity();
    for (std::int64_t c = 0; c < cols; ++c) max = std::max(max, in[c]);
    if (max == -std::numeric_limits<double>::infinity()) {
      for (std::int64_t c = 0; c < cols; ++c) out[c] = 0.0;  // nothing visible in this row
      continue;
    }
    double sum = 0.0;
    for (std::int64_t c = 0; c < cols; ++c) sum += std::exp(in[c] - max);
    for (std::int64_t c = 0; c < cols; ++c) out[c] = std::exp(in[c] - max) / sum;
  }
  return y;
}

std::vector<double> softmax_backward(std::span<const double> y, std::span<const double> dy, std::int64_t rows,
                                     std::int64_t cols) {
  std::vector<double> dx(y.size());
  for (std::int64_t r = 0; r < rows; ++r) {
    const double* yr = y.data() + r * cols;
    const double* gr = dy.data() + r * cols;
    double dot = 0.0;
    for (std::int64_t c = 0; c < cols; ++c) dot += gr[c] * yr[c];
    for (std::int64_t c = 0; c < cols; ++c) dx[r * cols + c] = yr[c] * (gr[c] - dot);
  }
  return dx;
}

}  // namespace ignis::ref
