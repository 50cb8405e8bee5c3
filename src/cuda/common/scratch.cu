// Scratch's kept buffers: one a stream, grown in stream order, never returned while the process runs.
#include "cuda/common/scratch.h"

#include <cuda_runtime.h>

#include <cstdint>
#include <map>
#include <mutex>
#include <utility>

#include "core/cuda_check.h"
#include "cuda/common/launch.cuh"

namespace ignis::cuda {

struct KeptBuffer {
  void* data = nullptr;
  std::size_t bytes = 0;
  bool borrowed = false;
};

namespace {

// Keyed by device and stream handle. A handle is not reused before its destroyed stream's work is done
// (the driver keeps the stream until then): the same assumption torch's caching allocator makes when it
// hands a freed block to the next allocation on that stream. Entries are never erased, so a Scratch may
// hold a pointer to one.
using StreamKey = std::pair<int, std::uintptr_t>;

struct KeptBuffers {
  std::mutex mutex;
  std::map<StreamKey, KeptBuffer> by_stream;
};

// Never destroyed: at exit the CUDA runtime may already be gone, and the driver frees the memory anyway.
KeptBuffers& kept_buffers() {
  static auto* buffers = new KeptBuffers;
  return *buffers;
}

// Whether s may keep a buffer: not under capture, and not the per-thread default stream, whose one
// handle names another stream on every host thread (a buffer a thread would leave behind).
bool keeps_buffer(cudaStream_t s) {
  if (s == cudaStreamPerThread) return false;
  cudaStreamCaptureStatus status = cudaStreamCaptureStatusNone;
  if (cudaStreamIsCapturing(s, &status) != cudaSuccess) {
    (void)cudaGetLastError();  // an illegal query during another thread's capture: take the graph-safe path
    return false;
  }
  return status == cudaStreamCaptureStatusNone;
}

}  // namespace

Scratch::Scratch(std::size_t bytes, Stream stream) : stream_(stream) {
  const cudaStream_t s = to_cuda(stream);
  if (bytes == 0) bytes = 1;
  if (bytes <= kKeptScratchBytes && keeps_buffer(s)) {
    int device = 0;
    IGNIS_CUDA_CHECK(cudaGetDevice(&device));
    KeptBuffers& buffers = kept_buffers();
    const std::lock_guard<std::mutex> lock(buffers.mutex);
    KeptBuffer& kept = buffers.by_stream[StreamKey{device, reinterpret_cast<std::uintptr_t>(s)}];
    if (!kept.borrowed) {
      if (kept.bytes < bytes) {
        // In stream order: the old buffer goes back once the stream's earlier calls are done with it.
        if (kept.data != nullptr) IGNIS_CUDA_CHECK(cudaFreeAsync(kept.data, s));
        kept = KeptBuffer{};
        IGNIS_CUDA_CHECK(cudaMallocAsync(&kept.data, bytes, s));
        kept.bytes = bytes;
      }
      kept.borrowed = true;
      kept_ = &kept;
      data_ = kept.data;
      return;
    }
  }
  IGNIS_CUDA_CHECK(cudaMallocAsync(&data_, bytes, s));
}

Scratch::~Scratch() {
  if (kept_ == nullptr) {
    cudaFreeAsync(data_, to_cuda(stream_));  // a destructor must not throw
    return;
  }
  const std::lock_guard<std::mutex> lock(kept_buffers().mutex);
  kept_->borrowed = false;
}

}  // namespace ignis::cuda
