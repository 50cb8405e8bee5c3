#pragma once
// The host-side checks of an append to a KV cache, shared by kv_cache_append and rope_qkv_append.
#include <cstdint>
#include <span>

#include "ignis/tensor.h"

namespace ignis::ops {

// lengths: [batch] i32 on `device`, contiguous; host_lengths.size() == batch; max_seqlen fits i32;
// and for every b, 0 <= host_lengths[b] and host_lengths[b] + new_tokens <= max_seqlen
// (else "<where>: context length exceeded: sequence b length + new_tokens: ...").
void check_kv_room(const char* where, const Tensor& lengths, std::span<const std::int64_t> host_lengths,
                   std::int64_t batch, std::int64_t new_tokens, std::int64_t max_seqlen, Device device);

}  // namespace ignis::ops
