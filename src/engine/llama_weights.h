#pragma once
// The weights of a Llama-family model, read from GGUF and dequantized at load for the CPU.
//
// q/k row order. GGUF stores attn_q/attn_k rows permuted so that each RoPE pair sits in adjacent
// rows (model/gguf_llama_permute.h). The engine keeps that order and rotates with interleaved
// RoPE (QkOrder::gguf_interleaved, the default: nothing to do at load). QkOrder::hf_rotate_half
// undoes the permutation at load and rotates halves instead; the two compute the same model
// (tests/engine checks it), and it serves kernels that want the HF layout.
#include <cstdint>
#include <optional>
#include <vector>

#include "engine/linear.h"
#include "engine/llama_config.h"
#include "engine/model_options.h"
#include "ignis/ops/rope.h"
#include "model/gguf.h"

namespace ignis::engine {

// The RoPE pairing that matches the weights' q/k row order.
RopeStyle rope_style(QkOrder order);

struct LlamaLayerWeights {
  std::vector<float> attn_norm;  // [dim]
  std::vector<float> ffn_norm;   // [dim]
  LinearWeight wq;               // [n_heads * head_dim, dim]
  LinearWeight wk;               // [n_kv_heads * head_dim, dim]
  LinearWeight wv;               // [n_kv_heads * head_dim, dim]
  LinearWeight wo;               // [dim, n_heads * head_dim]
  LinearWeight w_gate;           // [ffn_dim, dim]
  LinearWeight w_up;             // [ffn_dim, dim]
  LinearWeight w_down;           // [dim, ffn_dim]
};

struct LlamaWeights {
  LinearWeight token_embd;  // [vocab, dim]
  std::vector<LlamaLayerWeights> layers;
  std::vector<float> output_norm;      // [dim]
  std::optional<LinearWeight> output;  // [vocab, dim]; absent: tied to token_embd
  // [rotary_dim / 2] divisors of the RoPE frequencies (GGUF rope_freqs.weight, Llama 3.1); empty if absent.
  std::vector<float> rope_freq_factors;
  QkOrder qk_order = QkOrder::gguf_interleaved;

  const LinearWeight& lm_head() const { return output ? *output : token_embd; }
  std::size_t bytes() const;

  // Reads every tensor named in the file's Llama layout, checking each shape against `config`;
  // throws ignis::Error naming the tensor for a missing one, a wrong shape, or a type that
  // cannot be dequantized.
  static LlamaWeights load(const model::GgufFile& file, const LlamaConfig& config, const WeightOptions& options = {});
};

}  // namespace ignis::engine
