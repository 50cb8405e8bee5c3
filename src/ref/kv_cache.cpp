#include "ref/kv_cache.h"

#include "ignis/error.h"

namespace ignis::ref {

KvCacheState kv_cache_append(std::span<const double> k_cache, std::span<const double> v_cache,
                             std::span<const std::int64_t> lengths, std::span<const double> k_new,
                             std::span<const double> v_new, const KvCacheDims& dims, std::int64_t new_tokens) {
  for (std::int64_t b = 0; b < dims.batch; ++b)
    check_arg(lengths[b] >= 0 && lengths[b] + new_tokens <= dims.max_seqlen, "ref::kv_cache_append",
              detail::lazy_concat("context length exceeded: sequence ", b, " length + new_tokens"),
              detail::lazy_concat("<= max_seqlen ", dims.max_seqlen),
              detail::lazy_concat(lengths[b], " + ", new_tokens));
  KvCacheState out{{k_cache.begin(), k_cache.end()}, {v_cache.begin(), v_cache.end()}, {}};
  const std::int64_t row = dims.heads_kv * dims.head_dim;
  for (std::int64_t b = 0; b < dims.batch; ++b) {
    for (std::int64_t t = 0; t < new_tokens; ++t)
      for (std::int64_t e = 0; e < row; ++e) {
        const std::int64_t dst = (b * dims.max_seqlen + lengths[b] + t) * row + e;
        const std::int64_t src = (b * new_tokens + t) * row + e;
        out.k[dst] = k_new[src];
        out.v[dst] = v_new[src];
      }
    out.lengths.push_back(lengths[b] + new_tokens);
  }
  return out;
}

}  // namespace ignis::ref
