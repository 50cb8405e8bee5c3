#include "cpu/rope.h"

#include <algorithm>
#include <cmath>
#include <vector>

namespace ignis::cpu {

void rope_f32(const float* x, float* y, const float* inv_freq, const std::int32_t* batch_offsets,
              std::int64_t position_offset, const RopeLayout& layout, float attention_factor, float sin_sign) {
  const std::int64_t pairs = layout.rotary_dim / 2;
  // Every head of a token shares the angles: one table per token. std::cos/sin in double keep
  // large angles (position ~1e6) accurate; the product position * inv_freq is exact in double.
  std::vector<float> cos_t(pairs), sin_t(pairs);
  const std::int64_t a_step = layout.interleaved ? 2 : 1;
  const std::int64_t b_shift = layout.interleaved ? 1 : pairs;
  for (std::int64_t b = 0; b < layout.batch; ++b)
    for (std::int64_t s = 0; s < layout.seqlen; ++s) {
      const std::int64_t pos = position_offset + (batch_offsets ? batch_offsets[b] : 0) + s;
      for (std::int64_t i = 0; i < pairs; ++i) {
        const double angle = static_cast<double>(pos) * static_cast<double>(inv_freq[i]);
        cos_t[i] = static_cast<float>(attention_factor * std::cos(angle));
        sin_t[i] = static_cast<float>(attention_factor * sin_sign * std::sin(angle));
      }
      const std::int64_t token = b * layout.seqlen + s;
      for (std::int64_t h = 0; h < layout.heads; ++h) {
        const std::int64_t row = (token * layout.heads + h) * layout.head_dim;
        const float* in = x + row;
        float* out = y + row;
        for (std::int64_t i = 0; i < pairs; ++i) {
          const float a = in[i * a_step], bv = in[i * a_step + b_shift];
          out[i * a_step] = a * cos_t[i] - bv * sin_t[i];
          out[i * a_step + b_shift] = bv * cos_t[i] + a * sin_t[i];
        }
        if (out != in) std::copy(in + layout.rotary_dim, in + layout.head_dim, out + layout.rotary_dim);
      }
    }
}

}  // namespace ignis::cpu
