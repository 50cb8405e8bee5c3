#pragma once
// kv_cache_append: writes new key/value rows behind each sequence's current length.
//
// The lengths live in two places: an i32 tensor on the cache's device, which the kernel reads
// and advances, and a host mirror that the caller keeps. The device copy means a decode step
// needs no host-to-device copy of positions (a copy from pageable host memory would block the
// host each token) and can be captured in a CUDA graph; attention kernels read the same tensor.
// The host mirror lets the overflow check run on the host without reading the device back.
// Keeping the two in step is the caller's job: append only through this function.
#include <cstdint>
#include <span>

#include "ignis/stream.h"
#include "ignis/tensor.h"

namespace ignis {

// Any floating dtype, on the CPU and on CUDA.
bool kv_cache_supported(Device device, DType dtype);

// k_cache, v_cache: [batch, max_seqlen, heads_kv, head_dim], updated in place;
// k_new, v_new: [batch, new_tokens, heads_kv, head_dim]; all contiguous, same dtype and device.
// lengths: [batch] i32 on the cache's device; host_lengths: [batch], the host's copy of it.
// Token t of sequence b is written at position lengths[b] + t; then both lengths advance by
// new_tokens. Throws ignis::Error ("context length exceeded") before writing anything when
// host_lengths[b] + new_tokens > max_seqlen for some b. On the CPU a mismatch between the two
// lengths is an error too; on CUDA it cannot be seen without a sync, and rows that would land
// past max_seqlen are dropped rather than written out of bounds.
void kv_cache_append(const Tensor& k_cache, const Tensor& v_cache, const Tensor& k_new, const Tensor& v_new,
                     const Tensor& lengths, std::span<std::int64_t> host_lengths, Stream stream = {});

}  // namespace ignis
