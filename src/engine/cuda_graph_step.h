#pragma once
// The CUDA graph of a model's decode step, shared by the CUDA forwards (Llama, GPT-2).
//
// A decode step whose every launch reads its inputs from device memory (the previous step's
// sampled id, the cache's device lengths) is the same sequence of kernels at every position, so
// it is captured once and replayed for every later token. What a captured step points at is the
// cache's buffers and its capacity: a step on another cache (or after the model moved its own
// buffers, see drop) captures again. The first step on a cache launches plainly: it also builds
// the cuBLASLt plans and caches every launcher's device queries, so nothing but kernels is left
// for the capture. If a capture fails, a line on stderr says so and steps launch plainly from then on.
#include <cstdint>
#include <functional>
#include <vector>

#include "engine/kv_cache.h"
#include "ignis/stream.h"

struct CUgraphExec_st;  // cudaGraphExec_t, without the CUDA headers

namespace ignis::engine {

class CudaGraphStep {
 public:
  explicit CudaGraphStep(bool enabled) : enabled_(enabled) {}
  ~CudaGraphStep() { drop(); }
  CudaGraphStep(const CudaGraphStep&) = delete;
  CudaGraphStep& operator=(const CudaGraphStep&) = delete;

  // Whether decode steps go through run(): graphs requested and no capture has failed.
  bool active() const { return enabled_ && !failed_; }
  // One decode step on `stream`: `launch` enqueues its kernels (with no host synchronization and
  // no allocation); it runs plainly, under capture, or not at all when a graph is replayed.
  void run(const KvCache& cache, Stream stream, const std::function<void()>& launch);
  // Forgets the graph: the buffers it points at are about to move.
  void drop();
  // Steps replayed from a captured graph so far.
  std::int64_t replays() const { return replays_; }

 private:
  bool capture(Stream stream, const std::function<void()>& launch, const std::vector<const void*>& key);

  bool enabled_;
  bool failed_ = false;
  CUgraphExec_st* graph_ = nullptr;
  std::vector<const void*> graph_key_, warm_key_;
  std::int64_t replays_ = 0;
};

}  // namespace ignis::engine
