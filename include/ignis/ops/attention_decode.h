#pragma once
// Split-K ("flash decoding") attention for one query per sequence over a KV cache read in place.
// Semantics are those of attention_naive_kvcache_forward with seqlen_q = 1: sequence b's query
// sits at position seqlens_k[b] - 1 and sees its first seqlens_k[b] keys (clamped to
// [0, max_seqlen]); a length of 0 gives o = 0. The launch configuration depends only on the
// shapes, never on the lengths (read on the device), so a captured decode step replays from a
// CUDA graph while the cache grows.
#include <cstdint>

#include "ignis/attention_params.h"
#include "ignis/stream.h"
#include "ignis/tensor.h"

namespace ignis {

// head_dim must be a multiple of 8 and at most this.
inline constexpr std::int64_t kAttentionDecodeMaxHeadDim = 256;

// CUDA f32, f16 and bf16 (accumulated in fp32).
bool attention_decode_supported(Device device, DType dtype);
// A multiple of 8 up to kAttentionDecodeMaxHeadDim.
bool attention_decode_head_dim_supported(std::int64_t head_dim);

// q, o: [batch, 1, heads_q, head_dim]; k_cache, v_cache: [batch, max_seqlen, heads_kv, head_dim]
// with heads_q % heads_kv == 0 (query head h reads kv head h / (heads_q / heads_kv));
// seqlens_k: [batch] i32 on q's device. One dtype for q, k_cache, v_cache and o; all contiguous
// with 16-byte aligned data. params: scale (0 = 1 / sqrt(head_dim)), causal (no effect on a single
// query), window_left (keys older than seqlens_k[b] - 1 - window_left are hidden), window_right
// (no effect) and softcap.
void attention_decode_forward(const Tensor& q, const Tensor& k_cache, const Tensor& v_cache, const Tensor& seqlens_k,
                              const Tensor& o, const AttentionParams& params, Stream stream = {});

// Bytes of device memory the split partials take for these shapes (0 without CUDA).
std::int64_t attention_decode_workspace_bytes(std::int64_t batch, std::int64_t max_seqlen, std::int64_t heads_q,
                                              std::int64_t heads_kv, std::int64_t head_dim);
// The same op with a caller-owned workspace: [>= attention_decode_workspace_bytes] u8, on q's device,
// 256-byte aligned, not used by anything else until the op has run. With it a call allocates
// nothing, so a captured CUDA graph holds only the two kernels.
void attention_decode_forward(const Tensor& q, const Tensor& k_cache, const Tensor& v_cache, const Tensor& seqlens_k,
                              const Tensor& o, const AttentionParams& params, const Tensor& workspace,
                              Stream stream = {});

}  // namespace ignis
