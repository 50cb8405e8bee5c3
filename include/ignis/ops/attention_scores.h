#pragma once
// attention_scores (S = scale * Q K^T, masked) and the unfused attention pipeline built on it:
// GEMM NT -> scale/mask -> softmax -> GEMM NN, each stage through memory. The baseline that
// fused kernels are compared with.
//
// Layout (as flash_attn_func): q [batch, seqlen_q, heads_q, head_dim], k and v
// [batch, seqlen_k, heads_kv, head_dim]. GQA: heads_q % heads_kv == 0 and query head h reads kv
// head h / (heads_q / heads_kv). The causal mask is bottom-right aligned: key j is visible to
// query i when j <= i + seqlen_k - seqlen_q. A query with no visible key gets probability 0 and
// output 0.
#include "ignis/stream.h"
#include "ignis/tensor.h"

namespace ignis {

struct AttentionScoresParams {
  double scale = 1.0;  // usually 1 / sqrt(head_dim)
  bool causal = false;
};

// CUDA f64/f32/f16/bf16.
bool attention_scores_supported(Device device, DType dtype);
// q: [batch, seqlen_q, heads_q, head_dim], k: [batch, seqlen_k, heads_kv, head_dim]
// -> s: [batch, heads_q, seqlen_q, seqlen_k]; hidden entries are -inf. All contiguous, same dtype.
void attention_scores(const Tensor& q, const Tensor& k, const Tensor& s, const AttentionScoresParams& params,
                      Stream stream = {});

// CUDA f32/f16/bf16. S and P live in one workspace of [batch * heads_q, seqlen_q, seqlen_k]
// elements of the storage type, allocated on `stream` for the call; P is rounded to the storage
// type before the second product, as a naive implementation does.
bool attention_unfused_supported(Device device, DType dtype);
// q: [batch, seqlen_q, heads_q, head_dim], k, v: [batch, seqlen_k, heads_kv, head_dim]
// -> o: [batch, seqlen_q, heads_q, head_dim]. All contiguous, same dtype and device.
void attention_unfused_forward(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& o,
                               const AttentionScoresParams& params, Stream stream = {});

}  // namespace ignis
