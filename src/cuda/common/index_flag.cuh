#pragma once
// The device-side record of an out-of-range index: kernels never read through a bad index, they
// record it here and the host turns the record into an ignis::Error.
// Layout: long long[3] = {position, index, bound}; position -1 means nothing was recorded.
#include <cuda_runtime.h>

#include <cstdint>

#include "core/cuda_check.h"
#include "cuda/common/launch.cuh"

namespace ignis::cuda {

constexpr std::size_t kIndexFlagBytes = 3 * sizeof(long long);

// The first caller to claim the flag writes its record; later ones leave it, so the record is
// always one consistent (position, index, bound) triple.
__device__ __forceinline__ void record_bad_index(long long* flag, long long position, long long index,
                                                 long long bound) {
  auto* slot = reinterpret_cast<unsigned long long*>(flag);
  if (atomicCAS(slot, ~0ull, static_cast<unsigned long long>(position)) == ~0ull) {
    flag[1] = index;
    flag[2] = bound;
  }
}

// Sets position to -1 (all one bits), stream-ordered.
inline void clear_index_flag(long long* flag, Stream stream) {
  IGNIS_CUDA_CHECK(cudaMemsetAsync(flag, 0xFF, sizeof(long long), to_cuda(stream)));
}

// Waits for `stream` and copies the record to the host.
inline void read_index_flag(const long long* flag, long long (&host)[3], Stream stream) {
  IGNIS_CUDA_CHECK(cudaMemcpyAsync(host, flag, kIndexFlagBytes, cudaMemcpyDeviceToHost, to_cuda(stream)));
  IGNIS_CUDA_CHECK(cudaStreamSynchronize(to_cuda(stream)));
}

}  // namespace ignis::cuda
