#include "engine/causal_lm.h"

#include "ignis/tensor.h"

namespace ignis::engine {

std::int32_t CausalLm::forward_sample(std::span<const std::int32_t> tokens, KvCache& cache,
                                      const SamplingParams& params) {
  const std::span<const float> logits = forward(tokens, cache);
  std::int32_t id = 0;
  sample(Tensor::view(const_cast<float*>(logits.data()), DType::f32, Device::cpu(), {1, vocab_size()}), params,
         Tensor::view(&id, DType::i32, Device::cpu(), {1}));
  return id;
}

}  // namespace ignis::engine
