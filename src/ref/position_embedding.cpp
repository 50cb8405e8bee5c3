#include "ref/position_embedding.h"

namespace ignis::ref {

std::vector<double> position_embedding_add(std::span<const double> x, std::span<const double> table,
                                           std::span<const std::int64_t> starts, std::int64_t seqlen,
                                           std::int64_t dim) {
  std::vector<double> y(x.begin(), x.end());
  const auto positions = static_cast<std::int64_t>(table.size()) / dim;
  for (std::size_t b = 0; b < starts.size(); ++b) {
    for (std::int64_t s = 0; s < seqlen; ++s) {
      const std::int64_t p = starts[b] + s;
      if (p < 0 || p >= positions) continue;
      double* row = y.data() + (static_cast<std::int64_t>(b) * seqlen + s) * dim;
      for (std::int64_t d = 0; d < dim; ++d) row[d] += table[static_cast<std::size_t>(p * dim + d)];
    }
  }
  return y;
}

}  // namespace ignis::ref
