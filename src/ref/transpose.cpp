#include "ref/transpose.h"

namespace ignis::ref {

std::vector<double> transpose(std::span<const double> x, std::int64_t batch, std::int64_t rows, std::int64_t cols) {
  std::vector<double> y(x.size());
  for (std::int64_t z = 0; z < batch; ++z)
    for (std::int64_t r = 0; r < rows; ++r)
      for (std::int64_t c = 0; c < cols; ++c) y[(z * cols + c) * rows + r] = x[(z * rows + r) * cols + c];
  return y;
}

}  // namespace ignis::ref
