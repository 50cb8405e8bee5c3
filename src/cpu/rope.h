#pragma once
// The engine's CPU rotary embedding: fp32 storage and math, cos/sin evaluated in double.
#include <cstdint>

namespace ignis::cpu {

struct RopeLayout {
  std::int64_t batch, seqlen, heads, head_dim, rotary_dim;
  bool interleaved;  // pairs (2i, 2i+1) instead of (i, i + rotary_dim/2)
};

// x, y: [batch, seqlen, heads, head_dim] contiguous (y may equal x); inv_freq: [rotary_dim / 2];
// batch_offsets: [batch] or null. Token s of sequence b sits at position_offset + batch_offsets[b] + s.
// sin_sign = -1 applies the inverse rotation (the backward).
void rope_f32(const float* x, float* y, const float* inv_freq, const std::int32_t* batch_offsets,
              std::int64_t position_offset, const RopeLayout& layout, float attention_factor, float sin_sign);

}  // namespace ignis::cpu
