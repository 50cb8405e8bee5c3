#pragma once
// Attention forward, in the flash_attn_func layout, with grouped-query heads, bottom-right causal
// masks, sliding windows and softcapping (see ignis/attention_params.h).
#include "ignis/attention_params.h"
#include "ignis/stream.h"
#include "ignis/tensor.h"

namespace ignis {

// The dtype of the lse output for inputs of `dtype`: f64 for f64, else f32.
DType attention_lse_dtype(DType dtype);

// The naive kernel: one thread block per (batch, query head, query row), any sequence length,
// head_dim up to kAttentionNaiveMaxHeadDim. CUDA f32 and f64, accumulated in the input precision; CPU f32,
// sums in double.
// q, o: [batch, seqlen_q, heads_q, head_dim]; k, v: [batch, seqlen_k, heads_kv, head_dim] with
// heads_q % heads_kv == 0 (query head h reads kv head h / (heads_q / heads_kv));
// lse: [batch, heads_q, seqlen_q] of attention_lse_dtype(q.dtype()), natural log.
// All contiguous, on one device.
inline constexpr std::int64_t kAttentionNaiveMaxHeadDim = 256;
bool attention_naive_supported(Device device, DType dtype);
void attention_naive_forward(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& o, const Tensor& lse,
                             const AttentionParams& params, Stream stream = {});
// The same kernel over a KV cache read in place. k_cache, v_cache: [batch, max_seqlen, heads_kv,
// head_dim]; seqlens_k: [batch] i32 on q's device: sequence b's keys are its first seqlens_k[b]
// rows and its queries its last seqlen_q positions (masks aligned as above). The lengths are read
// on the device, so a decode step can be captured in a CUDA graph and replayed as the cache grows;
// a length outside [0, max_seqlen] is clamped. lse: as above, or an undefined Tensor() for none.
void attention_naive_kvcache_forward(const Tensor& q, const Tensor& k_cache, const Tensor& v_cache,
                                     const Tensor& seqlens_k, const Tensor& o, const Tensor& lse,
                                     const AttentionParams& params, Stream stream = {});

// Gradients of sum(dout * o) for o, lse = attention_naive_forward(q, k, v) with the same params, from its o and
// lse: dq like q, dk and dv like k (summed over each group's query heads); dout like q, lse f32. CPU f32 only (the
// CUDA backward is flash_attention_backward, bf16 and f16). A query with no visible key (lse -inf) passes no
// gradient.
bool attention_naive_backward_supported(Device device, DType dtype);
void attention_naive_backward(const Tensor& dout, const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& o,
                              const Tensor& lse, const Tensor& dq, const Tensor& dk, const Tensor& dv,
                              const AttentionParams& params, Stream stream = {});

}  // namespace ignis
