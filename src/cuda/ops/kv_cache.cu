// KV-cache append as two launches on one stream: a copy kernel that reads each sequence's
// position from the device lengths, then a tiny kernel that advances them. Splitting them keeps
// every block of the copy reading the old length (blocks run in no particular order). The copy
// moves bytes in the widest unit (16, 8, 4 or 2 bytes) that divides a token row and the
// alignment of every pointer, so it serves every dtype.
#include <cstdint>

#include "cuda/common/launch.cuh"
#include "cuda/ops/kv_cache.h"

namespace ignis::cuda {
namespace {

struct alignas(16) Bytes16 {
  std::uint64_t lo, hi;
};

// One thread per unit of one token row; a row is `row_units` units of U.
// k_cache, v_cache: [batch, max_seqlen, row_units]; k_new, v_new: [batch, new_tokens, row_units];
// lengths: [batch].
template <class U>
__global__ void append_kernel(U* __restrict__ k_cache, U* __restrict__ v_cache, const U* __restrict__ k_new,
                              const U* __restrict__ v_new, const std::int32_t* __restrict__ lengths, long long batch,
                              long long new_tokens, long long max_seqlen, long long row_units) {
  const long long total = batch * new_tokens * row_units;
  for (long long idx = blockIdx.x * static_cast<long long>(blockDim.x) + threadIdx.x; idx < total;
       idx += static_cast<long long>(gridDim.x) * blockDim.x) {
    const long long e = idx % row_units;
    const long long token = idx / row_units;  // b * new_tokens + t
    const long long b = token / new_tokens;
    const long long pos = lengths[b] + token % new_tokens;
    // The host checked its own copy of the lengths; if the device copy disagrees, drop the row
    // rather than write outside the cache.
    if (pos < 0 || pos >= max_seqlen) continue;
    const long long dst = (b * max_seqlen + pos) * row_units + e;
    k_cache[dst] = k_new[idx];
    v_cache[dst] = v_new[idx];
  }
}

// lengths: [batch].
__global__ void advance_kernel(std::int32_t* lengths, long long batch, int new_tokens) {
  const long long b = blockIdx.x * static_cast<long long>(blockDim.x) + threadIdx.x;
  if (b < batch) lengths[b] += new_tokens;
}

// k_cache, v_cache: [batch, max_seqlen, heads_kv, head_dim]; k_new, v_new: [batch, new_tokens, heads_kv,
// head_dim]; lengths: [batch] i32; a token row is row_units units of U.
template <class U>
void launch_copy(const Tensor& k_cache, const Tensor& v_cache, const Tensor& k_new, const Tensor& v_new,
                 const Tensor& lengths, long long row_units, Stream stream) {
  const long long batch = k_cache.size(0), max_seqlen = k_cache.size(1), new_tokens = k_new.size(1);
  const long long total = batch * new_tokens * row_units;
  constexpr int threads = 256;
  const unsigned blocks = ceil_div(total, threads) < 65535u ? ceil_div(total, threads) : 65535u;
  append_kernel<U><<<blocks, threads, 0, to_cuda(stream)>>>(
      k_cache.data_as<U>(), v_cache.data_as<U>(), k_new.data_as<const U>(), v_new.data_as<const U>(),
      lengths.data_as<const std::int32_t>(), batch, new_tokens, max_seqlen, row_units);
  IGNIS_CHECK_LAUNCH();
}

// t: any shape; only its data pointer is read.
bool aligned_to(const Tensor& t, std::size_t unit) { return reinterpret_cast<std::uintptr_t>(t.data()) % unit == 0; }

}  // namespace

void kv_cache_append(const Tensor& k_cache, const Tensor& v_cache, const Tensor& k_new, const Tensor& v_new,
                     const Tensor& lengths, Stream stream) {
  const long long batch = k_cache.size(0), new_tokens = k_new.size(1);
  if (batch == 0 || new_tokens == 0) return;
  const long long row_bytes = k_cache.size(2) * k_cache.size(3) * static_cast<long long>(dtype_size(k_cache.dtype()));
  if (row_bytes > 0) {
    std::size_t unit = 16;
    while (unit > 1 && (row_bytes % unit != 0 || !aligned_to(k_cache, unit) || !aligned_to(v_cache, unit) ||
                        !aligned_to(k_new, unit) || !aligned_to(v_new, unit)))
      unit /= 2;
    const long long units = row_bytes / static_cast<long long>(unit);
    switch (unit) {
      case 16: launch_copy<Bytes16>(k_cache, v_cache, k_new, v_new, lengths, units, stream); break;
      case 8: launch_copy<std::uint64_t>(k_cache, v_cache, k_new, v_new, lengths, units, stream); break;
      case 4: launch_copy<std::uint32_t>(k_cache, v_cache, k_new, v_new, lengths, units, stream); break;
      case 2: launch_copy<std::uint16_t>(k_cache, v_cache, k_new, v_new, lengths, units, stream); break;
      default: launch_copy<std::uint8_t>(k_cache, v_cache, k_new, v_new, lengths, units, stream); break;
    }
  }
  advance_kernel<<<ceil_div(batch, 256), 256, 0, to_cuda(stream)>>>(lengths.data_as<std::int32_t>(), batch,
                                                                     static_cast<int>(new_tokens));
  IGNIS_CHECK_LAUNCH();
}

}  // namespace ignis::cuda
