#pragma once
// CUDA rotary embedding launcher. Arguments are validated by the dispatcher in src/ops/rope.cpp.
#include "ignis/ops/rope.h"

namespace ignis::cuda {

// x, y: [batch, seqlen, heads, head_dim] contiguous, f32, f16 or bf16 (y may be x);
// inv_freq: [rotary_dim / 2] f32; args.batch_offsets: [batch] i32 when set.
// sin_sign = -1 rotates by the negated angle (the backward).
void rope(const Tensor& x, const Tensor& inv_freq, const Tensor& y, const RopeArgs& args, float sin_sign,
          Stream stream);

}  // namespace ignis::cuda
