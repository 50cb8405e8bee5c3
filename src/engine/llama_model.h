#pragma once
// A Llama-family decoder: token ids in, next-token logits out, the KV cache carried across calls.
//
// Per layer: x += Wo attn(rope(Wq n(x)), rope(Wk n(x)), Wv n(x)); x += Wdown swiglu(Wgate n(x), Wup n(x)),
// n = RMSNorm; then logits = lm_head(RMSNorm(x)). Linear layers run through linear_forward
// (OpenBLAS / AVX2), the norms, RoPE and SwiGLU through the ignis ops, attention through an
// AttentionBackend. On a CUDA device the same pass runs on the GPU (engine/cuda_llama.h):
// cuBLASLt linear layers, CUDA graphs for decode steps, sampling on the GPU.
#include <cstdint>
#include <memory>
#include <span>
#include <vector>

#include "engine/decoder_model.h"
#include "engine/kv_cache.h"
#include "engine/llama_config.h"
#include "engine/llama_weights.h"
#include "engine/model_options.h"
#include "ignis/device.h"
#include "ignis/ops/sampling.h"
#include "model/gguf.h"

namespace ignis::engine {

class LlamaModel : public DecoderModel {
 public:
  // Reads config and weights from the file. Throws for everything LlamaConfig::from_gguf and
  // LlamaWeights::load reject, and for q8 weights on CUDA.
  static std::unique_ptr<LlamaModel> load(const model::GgufFile& file, const ModelOptions& options = {});
  LlamaModel(LlamaConfig config, LlamaWeights weights, const ModelOptions& options = {});

  const LlamaConfig& config() const { return config_; }
  const LlamaWeights& weights() const { return weights_; }

  std::int64_t vocab_size() const override { return config_.vocab_size; }
  std::int64_t context_length() const override { return config_.context_length; }
  std::size_t weight_bytes() const override { return weights_.bytes(); }

  // A cache for up to max_seq positions (0: the model's context_length), on the model's device.
  KvCache make_cache(std::int64_t max_seq = 0) const override;

 private:
  // forward's rules: DecoderModel::check_forward_args, with "context length exceeded: N + M > max"
  // past the cache's room (the cache is then unchanged).
  void check_forward_args(std::span<const std::int32_t> tokens, const KvCache& cache) const override;
  // tokens: [n] ids; returns logits [n or 1, vocab].
  std::span<const float> forward_on_cpu(std::span<const std::int32_t> tokens, KvCache& cache,
                                        bool all_logits) override;
  void ensure_scratch(std::int64_t n);
  void attention_block(std::int64_t layer, std::int64_t n, KvCache& cache);
  void ffn_block(std::int64_t layer, std::int64_t n);

  LlamaConfig config_;
  LlamaWeights weights_;
  std::vector<float> inv_freq_;  // [rotary_dim / 2]
  float rope_factor_ = 1.0f;

  // Activations of one call, grown to the largest token count seen.
  std::int64_t scratch_tokens_ = 0;
  std::vector<float> x_, xn_, q_, attn_, proj_, gate_, up_, logits_;
};

}  // namespace ignis::engine
