#pragma once
// The CUDA stream an op runs on, without pulling CUDA headers into users of ignis.
// A default-constructed Stream is CUDA's legacy default stream. CPU ops ignore it.
namespace ignis {

struct Stream {
  void* handle = nullptr;  // a cudaStream_t
  // A promise from the caller: this op's constant inputs (weights) are not being written by the
  // work queued before it. Ops that can use it start while the previous kernel finishes and load
  // their weights meanwhile (programmatic dependent launch, sm_90, on a created stream); the others
  // ignore it.
  bool overlap_previous = false;
};

// Blocks until all work on `stream` is done; throws if a kernel on it failed.
void synchronize(Stream stream = {});

}  // namespace ignis
