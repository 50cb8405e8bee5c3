#pragma once
// The hyperparameters of a Llama-family model, read from GGUF metadata and validated.
#include <cstdint>
#include <string>

#include "ignis/ops/rope.h"
#include "model/gguf.h"

namespace ignis::engine {

struct LlamaConfig {
  std::string architecture = "llama";  // the GGUF key prefix: llama, mistral
  std::int64_t n_layers = 0;
  std::int64_t dim = 0;         // the residual width (embedding_length)
  std::int64_t ffn_dim = 0;     // feed_forward_length
  std::int64_t n_heads = 0;
  std::int64_t n_kv_heads = 0;  // divides n_heads (grouped-query attention)
  std::int64_t head_dim = 0;    // attention.key_length, else dim / n_heads
  std::int64_t rotary_dim = 0;  // rope.dimension_count, else head_dim
  std::int64_t vocab_size = 0;
  std::int64_t context_length = 0;
  double rope_theta = 10000.0;
  RopeScaling rope_scaling;
  float rms_eps = 1e-5f;

  // Reads `<arch>.*` keys. vocab_size comes from `<arch>.vocab_size`, else the length of
  // tokenizer.ggml.tokens, else the rows of token_embd.weight. Throws ignis::Error
  // ("llama config: <key>: expected ..., got ...") for a missing or bad value.
  static LlamaConfig from_gguf(const model::GgufFile& file);

  // Throws "llama config: <field>: expected ..., got ..." for inconsistent values.
  void validate() const;

  std::int64_t q_dim() const { return n_heads * head_dim; }
  std::int64_t kv_dim() const { return n_kv_heads * head_dim; }
};

}  // namespace ignis::engine
