#pragma once
// CUDA split-K decode attention launcher. Arguments are validated by src/ops/attention_decode.cpp.
#include "ignis/attention_params.h"
#include "ignis/stream.h"
#include "ignis/tensor.h"

namespace ignis::cuda {

// q, o: [batch, 1, heads_q, head_dim]; k_cache, v_cache: [batch, max_seqlen, heads_kv, head_dim];
// seqlens_k: [batch] i32 on the device. Contiguous, 16-byte aligned, f32/f16/bf16, head_dim a
// multiple of 8 up to 256; params.scale resolved (nonzero).
// workspace: attention_decode_workspace_bytes(...) bytes of device memory, or null to allocate
// them on the stream for this call.
void attention_decode_forward(const Tensor& q, const Tensor& k_cache, const Tensor& v_cache, const int* seqlens_k,
                              const Tensor& o, const AttentionParams& params, void* workspace, Stream stream);

std::size_t attention_decode_workspace_bytes(std::int64_t batch, std::int64_t max_seqlen, std::int64_t heads_q,
                                             std::int64_t heads_kv, std::int64_t head_dim);

// The number of keys each block of the split kernel reads for these shapes (a power of two in
// [32, 512]); exposed so tests can aim lengths at chunk edges.
int attention_decode_chunk(std::int64_t batch, std::int64_t max_seqlen, std::int64_t heads_q, std::int64_t heads_kv);

}  // namespace ignis::cuda
