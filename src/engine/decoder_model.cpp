#include "engine/decoder_model.h"

#include "engine/cpu_attention.h"
#include "engine/cpu_forward.h"

namespace ignis::engine {

DecoderModel::DecoderModel(const ModelOptions& options, const char* model) : options_(options) {
  check_device_format(options, model);
  pool_ = std::make_unique<ThreadPool>(options.threads);
  attention_ = make_cpu_attention(*pool_);
}

std::span<const float> DecoderModel::forward(std::span<const std::int32_t> tokens, KvCache& cache, bool all_logits) {
  check_forward_args(tokens, cache);
  if (!cuda_) return forward_on_cpu(tokens, cache, all_logits);
  const std::span<const float> logits = cuda_->forward(tokens, cache, all_logits);
  cache.advance(static_cast<std::int64_t>(tokens.size()));
  return logits;
}

std::int32_t DecoderModel::forward_sample(std::span<const std::int32_t> tokens, KvCache& cache,
                                          const SamplingParams& params) {
  if (!cuda_) return CausalLm::forward_sample(tokens, cache, params);
  check_forward_args(tokens, cache);
  const std::int32_t id = cuda_->forward_sample(tokens, cache, params);
  cache.advance(static_cast<std::int64_t>(tokens.size()));
  return id;
}

}  // namespace ignis::engine
