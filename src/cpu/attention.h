#pragma once
// CPU attention, forward and backward: fp32 storage, sums in double (a float running sum over a long row drifts).
// The flash_attn layout and mask rules of ignis/attention_params.h.
#include <cstdint>

#include "ignis/attention_params.h"

namespace ignis::cpu {

struct AttentionShape {
  std::int64_t batch, seqlen_q, seqlen_k, heads_q, heads_kv, head_dim;
};

// q, o: [batch, seqlen_q, heads_q, head_dim]; k, v: [batch, seqlen_k, heads_kv, head_dim]; lse: [batch, heads_q,
// seqlen_q] or null. seqlens_k: null, or [batch] in host memory: sequence b uses its first seqlens_k[b] key rows
// (clamped to [0, seqlen_k]) and its queries are its last seqlen_q positions. params.scale resolved (nonzero).
// A query with no visible key gets o = 0 and lse = -inf.
void attention_forward_f32(const float* q, const float* k, const float* v, float* o, float* lse,
                           const std::int32_t* seqlens_k, const AttentionShape& shape, const AttentionParams& params);

// Gradients of sum(dout * o) from the forward's o and lse (P recomputed as exp(s - lse)). dout, dq like q; dk, dv
// like k, each summed over its group's query heads.
void attention_backward_f32(const float* dout, const float* q, const float* k, const float* v, const float* o,
                            const float* lse, float* dq, float* dk, float* dv, const AttentionShape& shape,
                            const AttentionParams& params);

}  // namespace ignis::cpu
