#pragma once
// The Llama forward pass on CUDA, behind LlamaModel for a CUDA device.
//
// Weights live on the GPU: the linear layers as f32 (the correctness mode, plain fp32 products)
// or bf16 (the fast mode, fp32 accumulation), the embedding table and the norms as f32.
// The residual stream is f32; the KV cache, the rotated queries and the attention output take
// the linear layers' dtype (bf16 in the fast mode). A prompt runs its linear layers through
// cuBLASLt (the output projections accumulate into the residual); a decode step runs the fused
// ops of ignis/ops/fused_linear.h and rope_append.h (norm + matrix-vector products, RoPE + cache
// append), six launches a layer. Attention goes through the CUDA attention backend over the
// cache in place; everything runs on one stream of the model.
//
// Decode steps read their token id and positions from device memory (the previous step's sampled
// id, the cache's device lengths), so one step is captured once as a CUDA graph and replayed for
// every later token; if capture fails, a line on stderr says so and steps launch plainly.
#include <cstdint>
#include <memory>
#include <span>
#include <vector>

#include "engine/attention_backend.h"
#include "engine/kv_cache.h"
#include "engine/llama_config.h"
#include "engine/llama_weights.h"
#include "ignis/ops/sampling.h"

namespace ignis::engine {

struct CudaForwardOptions {
  Device device = Device::cuda(0);
  bool graphs = true;  // capture and replay decode steps
};

class CudaForward {
 public:
  virtual ~CudaForward() = default;
  virtual const AttentionBackend& attention() const = 0;
  // The KV cache's dtype: bf16 with bf16 weights (half the bytes a decode step reads), else f32.
  virtual DType cache_dtype() const = 0;
  // As LlamaModel::forward, with its arguments already checked; the cache is a CUDA cache of this
  // model's geometry and is not advanced (the caller does, after the call).
  virtual std::span<const float> forward(std::span<const std::int32_t> tokens, KvCache& cache, bool all_logits) = 0;
  // The same forward, then the next token sampled on the GPU from the last logits row: only the
  // id comes back to the host.
  virtual std::int32_t forward_sample(std::span<const std::int32_t> tokens, KvCache& cache,
                                      const SamplingParams& params) = 0;
  // Decode steps replayed from a captured graph so far (0 when graphs are off or capture failed).
  virtual std::int64_t graph_replays() const = 0;
};

// inv_freq: the RoPE inverse frequencies with any frequency factors applied, [rotary_dim / 2].
// The weights' linear layers must be f32 or bf16. Throws ignis::Error without CUDA.
std::unique_ptr<CudaForward> make_cuda_forward(const LlamaConfig& config, const LlamaWeights& weights,
                                               const std::vector<float>& inv_freq, float rope_factor,
                                               const CudaForwardOptions& options);

}  // namespace ignis::engine
