#pragma once
// CUDA launcher of rope_qkv_append. Arguments, including the overflow check against the host's
// length, are validated by the dispatcher in src/ops/rope_append.cpp.
#include "ignis/ops/rope_append.h"

namespace ignis::cuda {

// qkv: [n, (heads_q + 2 * heads_kv) * head_dim] f32; inv_freq: [rotary_dim / 2] f32;
// q_out: [n, heads_q, head_dim]; k_cache, v_cache: [1, max_seqlen, heads_kv, head_dim];
// lengths: [1] i32, read for the positions and advanced by n. q_out and the caches: f32, f16 or bf16.
void rope_qkv_append(const Tensor& qkv, const Tensor& inv_freq, const RopeAppendArgs& args, const Tensor& q_out,
                     const Tensor& k_cache, const Tensor& v_cache, const Tensor& lengths, Stream stream);

}  // namespace ignis::cuda
