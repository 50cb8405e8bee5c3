#pragma once
// CUDA KV-cache append launcher. Arguments, including the overflow check against the host's
// lengths, are validated by the dispatcher in src/ops/kv_cache.cpp.
#include "ignis/stream.h"
#include "ignis/tensor.h"

namespace ignis::cuda {

// k_cache, v_cache: [batch, max_seqlen, heads_kv, head_dim]; k_new, v_new: [batch, new_tokens,
// heads_kv, head_dim]; lengths: [batch] i32 on the device, advanced by new_tokens after the copy.
void kv_cache_append(const Tensor& k_cache, const Tensor& v_cache, const Tensor& k_new, const Tensor& v_new,
                     const Tensor& lengths, Stream stream);

}  // namespace ignis::cuda
