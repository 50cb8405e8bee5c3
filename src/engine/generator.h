#pragma once
// Text generation over token ids: prefill the context, then sample and feed one token at a time
// until a stop token, the token limit, the context limit or the callback ends it.
//
// The generator remembers which tokens its KV cache holds. A new call reuses the longest common
// prefix of those and the new context and runs only the rest, so a chat that re-sends the whole
// conversation each turn costs only the new turn.
#include <cstdint>
#include <functional>
#include <span>
#include <string>
#include <vector>

#include "engine/causal_lm.h"
#include "engine/kv_cache.h"

namespace ignis::engine {

struct GenerateOptions {
  std::int64_t max_new_tokens = 128;  // >= 0
  double temperature = 0.0;           // 0: greedy (argmax)
  std::int64_t top_k = 0;             // 0: every token
  double top_p = 1.0;                 // 1: every token
  std::uint64_t seed = 0;
  std::vector<std::int32_t> stop_ids;  // sampling one ends generation; it is not emitted
};

enum class StopReason { stop_token, max_tokens, context_full, callback };
std::string stop_reason_name(StopReason reason);

struct GenerationStats {
  std::int64_t context_tokens = 0;   // the context passed in
  std::int64_t reused_tokens = 0;    // of those, already in the cache
  std::int64_t prefill_tokens = 0;   // run through the model before the first sample
  std::int64_t generated_tokens = 0; // emitted (stop token excluded)
  double prefill_s = 0.0;            // the prefill forward
  double ttft_s = 0.0;               // from the call to the first sampled token
  double tbt_mean_s = 0.0;           // between consecutive sampled tokens
  double tbt_median_s = 0.0;
  double prefill_tokens_per_s = 0.0;
  double decode_tokens_per_s = 0.0;  // 1 / tbt_mean_s
};

struct GenerationResult {
  std::vector<std::int32_t> tokens;  // emitted tokens
  StopReason reason = StopReason::max_tokens;
  GenerationStats stats;
};

// Called with each emitted token as soon as it is sampled; returning false stops generation.
using TokenCallback = std::function<bool(std::int32_t)>;

class Generator {
 public:
  // `model` must outlive the generator. max_seq: the cache size (0: the model's context length).
  explicit Generator(CausalLm& model, std::int64_t max_seq = 0);

  // Generates after `context` (the full context: earlier turns included). Throws ignis::Error
  // for an empty context, bad options, a bad id, or a context longer than the cache
  // ("context length exceeded: ..."); generation that fills the cache stops with context_full.
  // context: [n] ids.
  GenerationResult generate(std::span<const std::int32_t> context, const GenerateOptions& options,
                            const TokenCallback& on_token = {});

  // The tokens whose K/V the cache holds, in order.
  const std::vector<std::int32_t>& cached_tokens() const { return cached_; }
  const KvCache& cache() const { return cache_; }
  void reset();

 private:
  CausalLm& model_;
  KvCache cache_;
  std::vector<std::int32_t> cached_;
};

}  // namespace ignis::engine
