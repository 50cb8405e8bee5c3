#pragma once
// Reference KV-cache append: new key/value rows copied behind each sequence's current length.
#include <cstdint>
#include <span>
#include <vector>

namespace ignis::ref {

struct KvCacheDims {
  std::int64_t batch = 1;
  std::int64_t max_seqlen = 0;
  std::int64_t heads_kv = 1;
  std::int64_t head_dim = 0;
};

struct KvCacheState {
  std::vector<double> k;                // [batch, max_seqlen, heads_kv, head_dim]
  std::vector<double> v;                // [batch, max_seqlen, heads_kv, head_dim]
  std::vector<std::int64_t> lengths;    // [batch]
};

// k_cache, v_cache: [batch, max_seqlen, heads_kv, head_dim]; lengths: [batch];
// k_new, v_new: [batch, new_tokens, heads_kv, head_dim]. Token t of sequence b lands at
// position lengths[b] + t; the result holds the updated caches and lengths + new_tokens.
// Throws ignis::Error ("context length exceeded") when lengths[b] + new_tokens > max_seqlen.
KvCacheState kv_cache_append(std::span<const double> k_cache, std::span<const double> v_cache,
                             std::span<const std::int64_t> lengths, std::span<const double> k_new,
                             std::span<const double> v_new, const KvCacheDims& dims, std::int64_t new_tokens);

}  // namespace ignis::ref
