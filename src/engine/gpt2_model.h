#pragma once
// GPT-2 (the Hugging Face layout): token ids in, next-token logits out, the KV cache carried
// across calls.
//
// x = wte[token] + wpe[position]; per layer: x += c_proj(attn(LN_1(x))), x += mlp_proj(gelu_tanh(
// c_fc(LN_2(x)))), every linear layer with a bias; then logits = LN_f(x) @ wte^T (tied). Multi-head
// attention through the same AttentionBackend and KvCache as Llama (heads_kv == heads). Positions
// are learned, so the context ends at n_positions: a longer one is an error, not an extrapolation.
// On a CUDA device the same pass runs on the GPU (engine/cuda_gpt2.h): cuBLASLt linear layers,
// CUDA graphs for decode steps, sampling on the GPU.
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "engine/decoder_model.h"
#include "engine/gpt2_config.h"
#include "engine/gpt2_weights.h"
#include "engine/kv_cache.h"
#include "engine/model_options.h"

namespace ignis::engine {

// The files of a Hugging Face GPT-2 folder.
struct Gpt2Files {
  std::string config;       // config.json
  std::string weights;      // model.safetensors
  std::string tokenizer;    // tokenizer.json (may be absent: only the CLI reads it)

  // `path`: the folder, or its .safetensors file (config.json and tokenizer.json beside it).
  // Throws ignis::Error when path is neither.
  static Gpt2Files locate(const std::string& path);
};

class Gpt2Model : public DecoderModel {
 public:
  // Reads config.json and model.safetensors (Gpt2Files::locate). Throws for q8 weights on CUDA
  // and for everything Gpt2Config::from_file and Gpt2Weights::load reject.
  static std::unique_ptr<Gpt2Model> load(const std::string& path, const ModelOptions& options = {});
  Gpt2Model(Gpt2Config config, Gpt2Weights weights, const ModelOptions& options = {});

  const Gpt2Config& config() const { return config_; }
  const Gpt2Weights& weights() const { return weights_; }

  std::int64_t vocab_size() const override { return config_.vocab_size; }
  std::int64_t context_length() const override { return config_.n_positions; }
  std::size_t weight_bytes() const override { return weights_.bytes(); }

  // A cache for up to max_seq positions (0: n_positions) on the model's device; throws for
  // max_seq > n_positions.
  KvCache make_cache(std::int64_t max_seq = 0) const override;

 private:
  // forward's rules: DecoderModel::check_forward_args, and positions past n_positions throw "context
  // length exceeded: <cached> + <new> > <n_positions> (learned positions)" whatever the cache's size.
  void check_forward_args(std::span<const std::int32_t> tokens, const KvCache& cache) const override;
  // tokens: [n] ids; returns logits [n or 1, vocab].
  std::span<const float> forward_on_cpu(std::span<const std::int32_t> tokens, KvCache& cache,
                                        bool all_logits) override;
  void ensure_scratch(std::int64_t n);
  void attention_block(std::int64_t layer, std::int64_t n, KvCache& cache);
  void mlp_block(std::int64_t layer, std::int64_t n);

  Gpt2Config config_;
  Gpt2Weights weights_;

  // Activations of one call, grown to the largest token count seen.
  std::int64_t scratch_tokens_ = 0;
  std::vector<float> x_, xn_, q_, attn_, proj_, ff_, logits_;
};

}  // namespace ignis::engine
