#pragma once
// The hyperparameters of a GPT-2 model, read from a Hugging Face config.json and validated.
#include <cstdint>
#include <string>
#include <string_view>

namespace ignis::engine {

struct Gpt2Config {
  std::int64_t n_layers = 0;     // n_layer
  std::int64_t dim = 0;          // n_embd, the residual width
  std::int64_t n_heads = 0;      // n_head (multi-head attention: as many K/V heads)
  std::int64_t ffn_dim = 0;      // n_inner, else 4 * n_embd
  std::int64_t n_positions = 0;  // rows of the learned position table: the longest context
  std::int64_t vocab_size = 0;
  float ln_eps = 1e-5f;            // layer_norm_epsilon
  bool scale_attn_weights = true;  // false: scores are q . k, not q . k / sqrt(head_dim)

  // Reads config.json. Throws ignis::Error "gpt2 config: <path>: cannot open" or
  // "gpt2 config: <path>: <key>: expected ..., got ..." for a missing or bad value, and for
  // features the engine does not run (another activation than the tanh GELU, cross-attention,
  // attention scaled by the layer index).
  static Gpt2Config from_file(const std::string& path);
  // The same from JSON text; `source` names it in errors.
  static Gpt2Config from_json_text(std::string_view text, const std::string& source);

  // Throws "gpt2 config: <field>: expected ..., got ..." for inconsistent values.
  void validate() const;

  std::int64_t head_dim() const { return dim / n_heads; }
};

}  // namespace ignis::engine
