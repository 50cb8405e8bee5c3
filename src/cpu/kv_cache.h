#pragma once
// The engine's CPU KV-cache append, for elements of any size.
#include <cstdint>

namespace ignis::cpu {

// Copies token t of sequence b from fresh [batch, new_tokens, row_bytes] to position
// lengths[b] + t of cache [batch, max_seqlen, row_bytes]. The caller checked the positions.
void kv_cache_append(void* cache, const void* fresh, const std::int32_t* lengths, std::int64_t batch,
                     std::int64_t max_seqlen, std::int64_t new_tokens, std::int64_t row_bytes);

}  // namespace ignis::cpu
