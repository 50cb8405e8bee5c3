#pragma once
// Reference rope_qkv_append, composed from the reference RoPE and KV-cache append, in double.
#include <cstdint>
#include <span>
#include <vector>

#include "ref/kv_cache.h"

namespace ignis::ref {

struct RopeAppendDims {
  std::int64_t tokens = 1;  // n
  std::int64_t heads_q = 1, heads_kv = 1, head_dim = 2;
  std::int64_t max_seqlen = 1;
  std::int64_t rotary_dim = 2;
  bool interleaved = false;
};

struct RopeAppendResult {
  std::vector<double> q;  // [tokens, heads_q, head_dim], rotated
  KvCacheState cache;     // k and v caches [1, max_seqlen, heads_kv, head_dim], lengths [1]
};

// qkv: [tokens, (heads_q + 2 * heads_kv) * head_dim] (q heads, k heads, v heads per token);
// inv_freq: [rotary_dim / 2]; k_cache, v_cache: [1, max_seqlen, heads_kv, head_dim].
// Token t sits at position length + t: q and k are rotated there (ref::rope_apply), k and the
// unrotated v are appended (ref::kv_cache_append, which throws "context length exceeded").
RopeAppendResult rope_qkv_append(std::span<const double> qkv, std::span<const double> inv_freq,
                                 std::span<const double> k_cache, std::span<const double> v_cache,
                                 std::int64_t length, const RopeAppendDims& dims, double attention_factor);

}  // namespace ignis::ref
