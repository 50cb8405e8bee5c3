#pragma once
// Stream-ordered device scratch memory for one op call: allocated from CUDA's memory pool on the
// op's stream and returned to it on the same stream, so kernels queued before the free finish first
// and a warm pool makes the pair cheap.
#include <cuda_runtime.h>

#include <cstddef>

#include "core/cuda_check.h"
#include "cuda/common/launch.cuh"

namespace ignis::cuda {

class Scratch {
 public:
  Scratch(std::size_t bytes, Stream stream) : stream_(stream) {
    IGNIS_CUDA_CHECK(cudaMallocAsync(&data_, bytes > 0 ? bytes : 1, to_cuda(stream)));
  }
  ~Scratch() { cudaFreeAsync(data_, to_cuda(stream_)); }  // a destructor must not throw
  Scratch(const Scratch&) = delete;
  Scratch& operator=(const Scratch&) = delete;

  // The byte at `offset` viewed as T (offsets are kept 16-byte aligned by the callers).
  template <class T>
  T* at(std::size_t offset) const {
    return reinterpret_cast<T*>(static_cast<char*>(data_) + offset);
  }

 private:
  void* data_ = nullptr;
  Stream stream_;
};

// Rounds a byte count up to 256, CUDA's allocation alignment, so sub-buffers stay aligned.
constexpr std::size_t align_up(std::size_t bytes) { return (bytes + 255) / 256 * 256; }

}  // namespace ignis::cuda
