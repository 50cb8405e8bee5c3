#include "cpu/position_embedding.h"

namespace ignis::cpu {

void position_embedding_add_f32(float* x, const float* table, const std::int64_t* starts, std::int64_t batch,
                                std::int64_t seqlen, std::int64_t dim) {
  for (std::int64_t b = 0; b < batch; ++b) {
    for (std::int64_t s = 0; s < seqlen; ++s) {
      float* row = x + (b * seqlen + s) * dim;
      const float* add = table + (starts[b] + s) * dim;
      for (std::int64_t d = 0; d < dim; ++d) row[d] += add[d];
    }
  }
}

}  // namespace ignis::cpu
