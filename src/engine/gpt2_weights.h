#pragma once
// The weights of a GPT-2 model, read from a Hugging Face model.safetensors.
//
// Hugging Face GPT-2 keeps its linear layers as Conv1D: weight [in, out], y = x @ W + b. The
// engine's LinearWeight is [out, in], so each is transposed at load; c_attn ([dim, 3 * dim],
// q | k | v along the out axis) is split into three so K and V can be written straight into
// their cache rows.
#include <cstdint>
#include <optional>
#include <vector>

#include "engine/gpt2_config.h"
#include "engine/linear.h"
#include "model/safetensors.h"

namespace ignis::engine {

struct Gpt2LayerWeights {
  std::vector<float> ln1_weight, ln1_bias;  // [dim]
  LinearWeight wq, wk, wv;                  // [dim, dim]
  std::vector<float> bq, bk, bv;            // [dim]
  LinearWeight attn_proj;                   // [dim, dim]
  std::vector<float> attn_proj_bias;        // [dim]
  std::vector<float> ln2_weight, ln2_bias;  // [dim]
  LinearWeight fc;                          // [ffn_dim, dim]
  std::vector<float> fc_bias;               // [ffn_dim]
  LinearWeight mlp_proj;                    // [dim, ffn_dim]
  std::vector<float> mlp_proj_bias;         // [dim]
};

struct Gpt2Weights {
  LinearWeight wte;         // [vocab, dim]: token embeddings and, tied, the lm head
  std::vector<float> wpe;   // [n_positions, dim]: learned position embeddings
  std::vector<Gpt2LayerWeights> layers;
  std::vector<float> ln_f_weight, ln_f_bias;  // [dim]
  std::optional<LinearWeight> lm_head_weight;  // [vocab, dim]; absent (the usual case): tied to wte

  const LinearWeight& lm_head() const { return lm_head_weight ? *lm_head_weight : wte; }
  std::size_t bytes() const;

  // Reads every tensor of the Hugging Face GPT-2 layout (names with or without the
  // "transformer." prefix), checking each shape against `config`; throws ignis::Error naming
  // the tensor for a missing one, a wrong shape or an unsupported dtype.
  static Gpt2Weights load(const model::SafetensorsFile& file, const Gpt2Config& config, WeightFormat format);
};

}  // namespace ignis::engine
