#pragma once
// CUDA attention scores and the unfused attention pipeline. Arguments are validated by the
// dispatchers in src/ops/attention_scores.cpp and src/ops/attention_unfused.cpp.
#include "ignis/ops/attention_scores.h"
#include "ignis/stream.h"
#include "ignis/tensor.h"

namespace ignis::cuda {

// q: [batch, seqlen_q, heads_q, head_dim], k: [batch, seqlen_k, heads_kv, head_dim]
// -> s: [batch, heads_q, seqlen_q, seqlen_k]; f64, f32, f16 or bf16.
void attention_scores(const Tensor& q, const Tensor& k, const Tensor& s, const AttentionScoresParams& params,
                      Stream stream);
// q, o: [batch, seqlen_q, heads_q, head_dim]; k, v: [batch, seqlen_k, heads_kv, head_dim]; f32, f16 or bf16.
void attention_unfused_forward(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& o,
                               const AttentionScoresParams& params, Stream stream);

}  // namespace ignis::cuda
