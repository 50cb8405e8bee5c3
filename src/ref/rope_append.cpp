#include "ref/rope_append.h"

#include "ref/rope.h"

namespace ignis::ref {

RopeAppendResult rope_qkv_append(std::span<const double> qkv, std::span<const double> inv_freq,
                                 std::span<const double> k_cache, std::span<const double> v_cache,
                                 std::int64_t length, const RopeAppendDims& d, double attention_factor) {
  const std::int64_t width = (d.heads_q + 2 * d.heads_kv) * d.head_dim;
  std::vector<double> q, k, v;
  for (std::int64_t t = 0; t < d.tokens; ++t) {
    const auto row = qkv.subspan(static_cast<std::size_t>(t * width), static_cast<std::size_t>(width));
    const auto k_at = row.begin() + d.heads_q * d.head_dim;
    const auto v_at = k_at + d.heads_kv * d.head_dim;
    q.insert(q.end(), row.begin(), k_at);
    k.insert(k.end(), k_at, v_at);
    v.insert(v.end(), v_at, row.end());
  }
  const std::int64_t start[] = {length};
  const RopeDims q_dims{1, d.tokens, d.heads_q, d.head_dim, d.rotary_dim, d.interleaved};
  const RopeDims k_dims{1, d.tokens, d.heads_kv, d.head_dim, d.rotary_dim, d.interleaved};
  RopeAppendResult result;
  result.q = rope_apply(q, inv_freq, q_dims, start, attention_factor, 1);
  const std::vector<double> k_rotated = rope_apply(k, inv_freq, k_dims, start, attention_factor, 1);
  const std::int64_t lengths[] = {length};
  result.cache = kv_cache_append(k_cache, v_cache, lengths, k_rotated, v, KvCacheDims{1, d.max_seqlen, d.heads_kv,
                                                                                     d.head_dim},
                                 d.tokens);
  return result;
}

}  // namespace ignis::ref
