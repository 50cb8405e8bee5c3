#include "cpu/embedding.h"

#include <algorithm>
#include <cstring>

namespace ignis::cpu {

template <class Id>
void embedding_forward_f32(const float* table, const Id* ids, float* out, std::int64_t n, std::int64_t dim) {
  for (std::int64_t i = 0; i < n; ++i)
    std::memcpy(out + i * dim, table + static_cast<std::int64_t>(ids[i]) * dim, sizeof(float) * dim);
}

template <class Id>
void embedding_backward_f32(const float* dout, const Id* ids, float* dtable, std::int64_t n, std::int64_t vocab,
                            std::int64_t dim) {
  std::fill(dtable, dtable + vocab * dim, 0.0f);
  for (std::int64_t i = 0; i < n; ++i) {
    float* row = dtable + static_cast<std::int64_t>(ids[i]) * dim;
    for (std::int64_t d = 0; d < dim; ++d) row[d] += dout[i * dim + d];
  }
}

template void embedding_forward_f32(const float*, const std::int32_t*, float*, std::int64_t, std::int64_t);
template void embedding_forward_f32(const float*, const std::int64_t*, float*, std::int64_t, std::int64_t);
template void embedding_backward_f32(const float*, const std::int32_t*, float*, std::int64_t, std::int64_t,
                                     std::int64_t);
template void embedding_backward_f32(const float*, const std::int64_t*, float*, std::int64_t, std::int64_t,
                                     std::int64_t);

}  // namespace ignis::cpu
