#pragma once
// CUDA flash attention backward launcher. Arguments are validated by the dispatcher in
// src/ops/flash_attention_backward.cpp.
#include "ignis/attention_params.h"
#include "ignis/stream.h"
#include "ignis/tensor.h"

namespace ignis::cuda {

// dout, q, o, dq: [batch, seqlen_q, heads_q, head_dim]; k, v, dk, dv: [batch, seqlen_k, heads_kv, head_dim];
// lse: [batch, heads_q, seqlen_q] f32, the forward's. Contiguous, 16-byte aligned; bf16 or f16; head_dim 64 or
// 128; params.scale already resolved (nonzero).
void flash_attention_backward(const Tensor& dout, const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& o,
                              const Tensor& lse, const Tensor& dq, const Tensor& dk, const Tensor& dv,
                              const AttentionParams& params, Stream stream);

}  // namespace ignis::cuda
