#pragma once
// Fused attention forward and backward on tensor cores (FlashAttention-2 style: K/V tiles streamed
// through shared memory, online softmax in fp32, the seqlen_q x seqlen_k matrix never stored). Same
// semantics as attention_naive_forward (ignis/ops/attention.h): bottom-right aligned causal
// mask, sliding windows, softcap, grouped-query heads, any sequence lengths, a row with no
// visible key gives o = 0 and lse = -inf; params.scale 0 means 1 / sqrt(head_dim).
#include <cstdint>

#include "ignis/attention_params.h"
#include "ignis/stream.h"
#include "ignis/tensor.h"

namespace ignis {

// The most blocks a query tile's keys may be split over (num_splits below).
inline constexpr std::int64_t kFlashAttentionMaxSplits = 64;

// CUDA bf16 and f16 (inputs stored in that dtype, accumulated in fp32).
bool flash_attention_supported(Device device, DType dtype);
// Head dims with a compiled kernel.
bool flash_attention_head_dim_supported(std::int64_t head_dim);

// q, o: [batch, seqlen_q, heads_q, head_dim]; k, v: [batch, seqlen_k, heads_kv, head_dim] with
// heads_q % heads_kv == 0 (query head h reads kv head h / (heads_q / heads_kv)), head_dim 64 or 128;
// lse: [batch, heads_q, seqlen_q] f32 (natural log), or an undefined Tensor() for none.
// All contiguous, on one device, data 16-byte aligned.
// num_splits (as flash_attn's): 0 chooses from the shapes and the GPU (a grid too small to fill the GPU
// splits each query tile's keys over several blocks and merges their results); 1 never splits;
// n in [2, 64] splits n ways. Results differ from an unsplit call by rounding only.
void flash_attention_forward(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& o, const Tensor& lse,
                             const AttentionParams& params, std::int64_t num_splits = 0, Stream stream = {});

// The same over a KV cache read in place. k_cache, v_cache: [batch, max_seqlen, heads_kv, head_dim];
// seqlens_k: [batch] i32 on q's device: sequence b has seqlens_k[b] keys (its first rows; a length
// outside [0, max_seqlen] is clamped) and its seqlen_q queries are its last seqlen_q positions.
// The launch depends on the shapes only, so a captured call replays as the lengths change.
// num_splits as above. The schedule (unit shape, split count) is planned on the host for longest_seqlen_k keys,
// the longest length when the caller knows it (as flash_attn's max_seqlen_k), else (0) for max_seqlen; any
// lengths are computed right whatever it says.
void flash_attention_kvcache_forward(const Tensor& q, const Tensor& k_cache, const Tensor& v_cache,
                                     const Tensor& seqlens_k, const Tensor& o, const Tensor& lse,
                                     const AttentionParams& params, std::int64_t num_splits = 0, Stream stream = {},
                                     std::int64_t longest_seqlen_k = 0);

// Gradients of sum(dout * o) for o = flash_attention_forward(q, k, v) with the same params: dq like q, dk and
// dv like k (each summed over the query heads of its group). o and lse are the forward's outputs (lse
// required). dout, dq: [batch, seqlen_q, heads_q, head_dim]; the rest as flash_attention_forward's: bf16 or
// f16, head_dim 64 or 128, contiguous, one CUDA device, 16-byte aligned. P is recomputed from lse and the
// seqlen_q x seqlen_k matrix is never stored. dq is summed over key tiles with fp32 atomics, so its rounding
// may differ from call to call; dk and dv do not.
void flash_attention_backward(const Tensor& dout, const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& o,
                              const Tensor& lse, const Tensor& dq, const Tensor& dk, const Tensor& dv,
                              const AttentionParams& params, Stream stream = {});

// The num_splits that 0 would choose for q: [batch, seqlen_q, heads_q, head_dim] against seqlen_k keys
// under params' mask, on the current CUDA device.
std::int64_t flash_attention_auto_splits(const Tensor& q, std::int64_t seqlen_k, const AttentionParams& params);

}  // namespace ignis
