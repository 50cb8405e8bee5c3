#pragma once
// The CUDA stream an op runs on, without pulling CUDA headers into users of ignis.
// A default-constructed Stream is CUDA's legacy default stream. CPU ops ignore it.
namespace ignis {

struct Stream {
  void* handle = nullptr;  // a cudaStream_t
};

// Blocks until all work on `stream` is done; throws if a kernel on it failed.
void synchronize(Stream stream = {});

}  // namespace ignis
