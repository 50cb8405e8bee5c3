#pragma once
// What LlamaModel and Gpt2Model share: the options, the CPU thread pool and attention, and on a
// CUDA device the model's CudaForward. forward checks the arguments (each model's own rules), then
// runs on the GPU or hands the call to the model's CPU pass; forward_sample keeps the logits on the
// GPU there, so only the sampled id comes back.
#include <cstdint>
#include <memory>
#include <span>

#include "engine/attention_backend.h"
#include "engine/causal_lm.h"
#include "engine/cuda_llama.h"
#include "engine/kv_cache.h"
#include "engine/model_options.h"
#include "engine/thread_pool.h"
#include "ignis/ops/sampling.h"

namespace ignis::engine {

class DecoderModel : public CausalLm {
 public:
  const ModelOptions& options() const { return options_; }
  const AttentionBackend& attention() const { return cuda_ ? cuda_->attention() : *attention_; }
  // CUDA decode steps replayed from a captured graph so far (0 on the CPU).
  std::int64_t cuda_graph_replays() const { return cuda_ ? cuda_->graph_replays() : 0; }

  // As CausalLm::forward. tokens: [n] ids.
  std::span<const float> forward(std::span<const std::int32_t> tokens, KvCache& cache,
                                 bool all_logits = false) final;
  // On CUDA the logits stay on the GPU: only the sampled id comes back. tokens: [n] ids.
  std::int32_t forward_sample(std::span<const std::int32_t> tokens, KvCache& cache,
                              const SamplingParams& params) final;

 protected:
  // Checks the options for `model` (its name in errors) and makes the CPU pool and attention.
  DecoderModel(const ModelOptions& options, const char* model);

  // Throws ignis::Error for no tokens, an id outside [0, vocab), a cache of another geometry or
  // device, or "context length exceeded: ...". tokens: [n] ids.
  virtual void check_forward_args(std::span<const std::int32_t> tokens, const KvCache& cache) const = 0;
  // The CPU pass of forward, its arguments checked; appends the K/V and advances the cache.
  // tokens: [n] ids; returns logits [n or 1, vocab].
  virtual std::span<const float> forward_on_cpu(std::span<const std::int32_t> tokens, KvCache& cache,
                                                bool all_logits) = 0;

  ModelOptions options_;
  std::unique_ptr<ThreadPool> pool_;
  std::unique_ptr<AttentionBackend> attention_;
  std::unique_ptr<CudaForward> cuda_;  // set by the model's constructor on a CUDA device
};

}  // namespace ignis::engine
