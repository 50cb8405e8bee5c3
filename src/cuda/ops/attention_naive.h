#pragma once
// CUDA naive attention launcher. Arguments are validated by the dispatcher in src/ops/attention_naive.cpp.
#include "ignis/attention_params.h"
#include "ignis/stream.h"
#include "ignis/tensor.h"

namespace ignis::cuda {

// q, o: [batch, seqlen_q, heads_q, head_dim]; k, v: [batch, seqlen_k, heads_kv, head_dim];
// lse: [batch, heads_q, seqlen_q] (f32, or f64 for f64 inputs), or no data pointer for none.
// Contiguous; f32 or f64; head_dim <= kAttentionNaiveMaxHeadDim; params.scale already resolved
// (nonzero). seqlens_k: null, or [batch] i32 on the device: sequence b then uses the first
// seqlens_k[b] of the seqlen_k rows of k and v (a KV cache read in place).
void attention_naive_forward(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& o, const Tensor& lse,
                             const int* seqlens_k, const AttentionParams& params, Stream stream);

}  // namespace ignis::cuda
