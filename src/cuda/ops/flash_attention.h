#pragma once
// CUDA flash attention launcher. Arguments are validated by the dispatcher in src/ops/flash_attention.cpp.
#include "ignis/attention_params.h"
#include "ignis/stream.h"
#include "ignis/tensor.h"

namespace ignis::cuda {

// q, o: [batch, seqlen_q, heads_q, head_dim]; k, v: [batch, seqlen_k, heads_kv, head_dim];
// lse: [batch, heads_q, seqlen_q] f32, or an undefined Tensor() for none. Contiguous, 16-byte
// aligned; bf16 or f16; head_dim 64 or 128; params.scale already resolved (nonzero).
// seqlens_k: null, or [batch] i32 on the device: sequence b then uses the first seqlens_k[b] of
// the seqlen_k rows of k and v (a KV cache read in place); the launch does not depend on them.
// num_splits: 0 for the planned count, else in [1, kMaxFlashSplits] (flash_split_plan.h). plan_seqlen_k: the
// keys the longest sequence sees, which the schedule (unit shape, split count) is planned for; 0 for seqlen_k.
void flash_attention_forward(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& o, const Tensor& lse,
                             const int* seqlens_k, const AttentionParams& params, int num_splits,
                             long long plan_seqlen_k, Stream stream);

// The split count num_splits = 0 plans for q against seqlen_k keys on the current device (q: [batch, seqlen_q,
// heads_q, head_dim], bf16 or f16, head_dim 64 or 128, checked by the dispatcher).
int flash_attention_auto_splits(const Tensor& q, long long seqlen_k, bool causal);

}  // namespace ignis::cuda
