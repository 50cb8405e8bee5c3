#include "ref/cross_entropy.h"

#include <algorithm>
#include <cmath>

#include "ops/index_check.h"

namespace ignis::ref {

CrossEntropyResult cross_entropy(std::span<const double> logits, std::span<const std::int64_t> targets,
                                 std::int64_t vocab, std::int64_t pad_id) {
  const auto n = static_cast<std::int64_t>(targets.size());
  CrossEntropyResult r;
  r.dlogits.assign(n * vocab, 0.0);
  r.row_loss.assign(n, 0.0);
  for (std::int64_t i = 0; i < n; ++i) {
    if (targets[i] == pad_id) continue;
    if (targets[i] < 0 || targets[i] >= vocab) ops::fail_bad_index("cross_entropy", "targets", i, targets[i], vocab);
    ++r.count;
  }
  for (std::int64_t i = 0; i < n; ++i) {
    if (targets[i] == pad_id) continue;
    const double* row = logits.data() + i * vocab;
    const double max = *std::max_element(row, row + vocab);
    double sum = 0.0;
    for (std::int64_t c = 0; c < vocab; ++c) sum += std::exp(row[c] - max);
    const double lse = max + std::log(sum);
    r.row_loss[i] = lse - row[targets[i]];
    r.loss += r.row_loss[i] / static_cast<double>(r.count);
    for (std::int64_t c = 0; c < vocab; ++c) {
      const double onehot = c == targets[i] ? 1.0 : 0.0;
      r.dlogits[i * vocab + c] = (std::exp(row[c] - lse) - onehot) / static_cast<double>(r.count);
    }
  }
  return r;
}

}  // namespace ignis::ref
