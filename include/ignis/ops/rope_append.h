#pragma once
// rope_qkv_append: the step between a fused q|k|v projection and attention, in one launch for a
// decode step: rotates q and k at their positions, writes q out and k, v into the KV cache behind
// the sequence's length, then advances the length (as kv_cache_append, see ignis/ops/kv_cache.h:
// the device length is read and advanced on the device, the host mirror is checked and advanced
// on the host).
#include <cstdint>
#include <span>

#include "ignis/ops/rope.h"
#include "ignis/stream.h"
#include "ignis/tensor.h"

namespace ignis {

struct RopeAppendArgs {
  std::int64_t rotary_dim = 0;  // even, in (0, head_dim]; dims past it pass through unchanged
  RopeStyle style = RopeStyle::rotate_half;
  float attention_factor = 1.0f;  // multiplies cos and sin (rope_attention_factor for yarn)
};

// CUDA only; cache_dtype f32, f16 or bf16.
bool rope_qkv_append_supported(Device device, DType cache_dtype);

// qkv: [n, (heads_q + 2 * heads_kv) * head_dim] f32, token t's row holds q (heads_q heads), then
// k, then v (heads_kv heads each), head_dim values per head.
// inv_freq: [rotary_dim / 2] f32 (see rope_inv_freq).
// q_out: [n, heads_q, head_dim], the cache dtype: q rotated.
// k_cache, v_cache: [1, max_seqlen, heads_kv, head_dim] (one sequence), updated in place.
// lengths: [1] i32 on the device; host_lengths: [1], the host's copy of it.
// Token t is at position p = lengths[0] + t: its q and k are rotated by p * inv_freq (pair (a, b)
// becomes f * (a cos - b sin, b cos + a sin), f = attention_factor, pairs as RopeStyle says), k
// and v land in cache row p; then both lengths advance by n. Throws ignis::Error ("context length
// exceeded") before launching anything when host_lengths[0] + n > max_seqlen; on the device, rows
// that would land past max_seqlen are dropped (the two lengths disagreeing cannot be seen
// without a sync). All tensors contiguous and on one device.
void rope_qkv_append(const Tensor& qkv, const Tensor& inv_freq, const RopeAppendArgs& args, const Tensor& q_out,
                     const Tensor& k_cache, const Tensor& v_cache, const Tensor& lengths,
                     std::span<std::int64_t> host_lengths, Stream stream = {});

}  // namespace ignis
