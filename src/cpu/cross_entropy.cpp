#include "cpu/cross_entropy.h"

#include <algorithm>
#include <cmath>

namespace ignis::cpu {

template <class Id>
void cross_entropy_f32(const float* logits, const Id* targets, std::int64_t n, std::int64_t vocab,
                       std::int64_t pad_id, float* loss, float* dlogits, float* row_loss) {
  std::int64_t count = 0;
  for (std::int64_t i = 0; i < n; ++i) count += targets[i] != pad_id;
  const float inv_count = count > 0 ? 1.0f / static_cast<float>(count) : 0.0f;
  double total = 0.0;  // n row losses: double keeps the mean independent of n
  for (std::int64_t i = 0; i < n; ++i) {
    const float* row = logits + i * vocab;
    float* grad = dlogits ? dlogits + i * vocab : nullptr;
    if (targets[i] == pad_id) {
      if (grad) std::fill(grad, grad + vocab, 0.0f);
      if (row_loss) row_loss[i] = 0.0f;
      continue;
    }
    const float max = *std::max_element(row, row + vocab);
    double sum = 0.0;  // tens of thousands of terms: a float sum would drift by ~1e-5
    for (std::int64_t c = 0; c < vocab; ++c) sum += std::exp(row[c] - max);
    const float lse = max + static_cast<float>(std::log(sum));
    const auto target = static_cast<std::int64_t>(targets[i]);
    const float l = lse - row[target];
    total += l;
    if (row_loss) row_loss[i] = l;
    if (!grad) continue;
    for (std::int64_t c = 0; c < vocab; ++c) grad[c] = std::exp(row[c] - lse) * inv_count;
    grad[target] -= inv_count;
  }
  *loss = count > 0 ? static_cast<float>(total / static_cast<double>(count)) : 0.0f;
}

template void cross_entropy_f32(const float*, const std::int32_t*, std::int64_t, std::int64_t, std::int64_t, float*,
                                float*, float*);
template void cross_entropy_f32(const float*, const std::int64_t*, std::int64_t, std::int64_t, std::int64_t, float*,
                                float*, float*);

}  // namespace ignis::cpu
