#include "cpu/kv_cache.h"

#include <cstring>

namespace ignis::cpu {

void kv_cache_append(void* cache, const void* fresh, const std::int32_t* lengths, std::int64_t batch,
                     std::int64_t max_seqlen, std::int64_t new_tokens, std::int64_t row_bytes) {
  auto* dst = static_cast<unsigned char*>(cache);
  const auto* src = static_cast<const unsigned char*>(fresh);
  // The new tokens of one sequence are adjacent in both tensors: one copy per sequence.
  for (std::int64_t b = 0; b < batch; ++b)
    std::memcpy(dst + (b * max_seqlen + lengths[b]) * row_bytes, src + b * new_tokens * row_bytes,
                static_cast<std::size_t>(new_tokens * row_bytes));
}

}  // namespace ignis::cpu
