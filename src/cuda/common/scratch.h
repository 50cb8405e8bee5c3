#pragma once
// Device scratch memory for one op call, on the op's stream.
//
// Most calls borrow a buffer kept for their stream between calls (scratch.cu): a stream-ordered
// cudaFreeAsync after a call's kernels costs ~0.6 us of the GPU's timeline (bench/launch_probe.cu:
// 4.06 -> 4.70 us for a plain launch on the H100, PERF_NOTES session 27), which is ~1 point of copy
// bandwidth for a 100 MB norm backward. cudaMallocAsync before the kernels costs nothing there. A buffer
// reused on one stream needs no synchronization: the stream orders every call's kernels. Under stream
// capture (a graph must own its memory), on the per-thread default stream, for requests above
// kKeptScratchBytes, and while the stream's buffer is borrowed by another Scratch, it allocates and
// frees in stream order from CUDA's pool. Host code only (tests include it).
#include <cstddef>

#include "ignis/stream.h"

namespace ignis::cuda {

// The largest scratch a stream keeps between calls; larger requests come from the pool each call,
// where the free's ~0.6 us is small against the work that needs that much memory.
inline constexpr std::size_t kKeptScratchBytes = std::size_t{64} << 20;

struct KeptBuffer;  // scratch.cu

class Scratch {
 public:
  Scratch(std::size_t bytes, Stream stream);
  ~Scratch();  // does not throw
  Scratch(const Scratch&) = delete;
  Scratch& operator=(const Scratch&) = delete;

  // The byte at `offset` viewed as T (offsets are kept 16-byte aligned by the callers).
  template <class T>
  T* at(std::size_t offset) const {
    return reinterpret_cast<T*>(static_cast<char*>(data_) + offset);
  }
  // Whether this scratch borrows its stream's kept buffer (else it was allocated in stream order).
  bool kept() const { return kept_ != nullptr; }

 private:
  void* data_ = nullptr;
  Stream stream_;
  KeptBuffer* kept_ = nullptr;  // the borrowed buffer's entry, which lives as long as the process
};

// Rounds a byte count up to 256, CUDA's allocation alignment, so sub-buffers stay aligned.
constexpr std::size_t align_up(std::size_t bytes) { return (bytes + 255) / 256 * 256; }

}  // namespace ignis::cuda
