#include "engine/cuda_graph_step.h"

#include <cstdio>
#include <exception>
#include <string>

#include "ignis/error.h"

#if IGNIS_WITH_CUDA
#include <cuda_runtime.h>

#include "core/cuda_check.h"
#endif

namespace ignis::engine {

#if IGNIS_WITH_CUDA

namespace {

// What a captured step points at: the cache's buffers and its capacity.
std::vector<const void*> cache_key(const KvCache& cache) {
  std::vector<const void*> key;
  for (std::int64_t l = 0; l < cache.n_layers(); ++l) {
    key.push_back(cache.k(l).data());
    key.push_back(cache.v(l).data());
  }
  key.push_back(cache.device_length(0).data());
  key.push_back(reinterpret_cast<const void*>(static_cast<std::uintptr_t>(cache.max_seq())));
  return key;
}

}  // namespace

void CudaGraphStep::run(const KvCache& cache, Stream stream, const std::function<void()>& launch) {
  const std::vector<const void*> key = cache_key(cache);
  if (graph_ == nullptr || key != graph_key_) {
    if (key != warm_key_) {
      launch();
      warm_key_ = key;
      return;
    }
    if (!capture(stream, launch, key)) return launch();
  }
  IGNIS_CUDA_CHECK(cudaGraphLaunch(graph_, static_cast<cudaStream_t>(stream.handle)));
  ++replays_;
}

bool CudaGraphStep::capture(Stream stream, const std::function<void()>& launch, const std::vector<const void*>& key) {
  drop();
  const auto s = static_cast<cudaStream_t>(stream.handle);
  std::string why;
  cudaGraph_t graph = nullptr;
  cudaError_t status = cudaStreamBeginCapture(s, cudaStreamCaptureModeRelaxed);
  if (status != cudaSuccess) {
    why = cudaGetErrorString(status);
  } else {
    try {
      launch();
    } catch (const std::exception& e) {
      why = e.what();
    }
    status = cudaStreamEndCapture(s, &graph);
    if (why.empty() && status != cudaSuccess) why = cudaGetErrorString(status);
    if (why.empty()) {
      status = cudaGraphInstantiate(&graph_, graph, 0);
      if (status != cudaSuccess) {
        why = cudaGetErrorString(status);
        graph_ = nullptr;
      }
    }
    if (graph != nullptr) cudaGraphDestroy(graph);
  }
  if (!why.empty()) {
    cudaGetLastError();  // a failed capture leaves its error behind; the plain launches that follow must not see it
    std::fprintf(stderr, "ignis: CUDA graph capture of the decode step failed (%s); decoding with plain launches\n",
                 why.c_str());
    failed_ = true;
    return false;
  }
  graph_key_ = key;
  return true;
}

void CudaGraphStep::drop() {
  // Called from the destructor: failures here leak at worst.
  if (graph_ != nullptr) cudaGraphExecDestroy(graph_);
  graph_ = nullptr;
  graph_key_.clear();
  warm_key_.clear();
}

#else

void CudaGraphStep::run(const KvCache&, Stream, const std::function<void()>& launch) { launch(); }
bool CudaGraphStep::capture(Stream, const std::function<void()>&, const std::vector<const void*>&) { return false; }
void CudaGraphStep::drop() {}

#endif

}  // namespace ignis::engine
