#pragma once
// What the generator needs of a decoder-only language model: token ids in, next-token logits
// (or the sampled next token) out, with the K/V of earlier positions kept in a KvCache the
// model makes. LlamaModel and Gpt2Model implement it.
#include <cstddef>
#include <cstdint>
#include <span>

#include "engine/kv_cache.h"
#include "ignis/ops/sampling.h"

namespace ignis::engine {

class CausalLm {
 public:
  virtual ~CausalLm() = default;

  virtual std::int64_t vocab_size() const = 0;
  // The positions the model was trained for (the default cache size).
  virtual std::int64_t context_length() const = 0;
  // Bytes of weights as stored for the engine.
  virtual std::size_t weight_bytes() const = 0;

  // A cache for up to max_seq positions (0: context_length()).
  virtual KvCache make_cache(std::int64_t max_seq = 0) const = 0;

  // Runs `tokens` at positions cache.length(), cache.length() + 1, ... and appends their K/V to
  // the cache. Returns logits [tokens.size(), vocab] when all_logits, else [1, vocab] for the
  // last token, valid until the next call. Throws ignis::Error for no tokens, an id outside
  // [0, vocab), or "context length exceeded: ..." (the cache is then unchanged). tokens: [n] ids.
  virtual std::span<const float> forward(std::span<const std::int32_t> tokens, KvCache& cache,
                                         bool all_logits = false) = 0;

  // forward, then the next token drawn from the last position's logits (ignis::sample with
  // `params`; params.step tells the steps apart). Throws as forward. This default samples on
  // the host; a model whose logits live on a GPU overrides it so that only the id comes back.
  // tokens: [n] ids.
  virtual std::int32_t forward_sample(std::span<const std::int32_t> tokens, KvCache& cache,
                                      const SamplingParams& params);
};

}  // namespace ignis::engine
