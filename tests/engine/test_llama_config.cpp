// Hyperparameters and weights read from GGUF: values, defaults and the errors for bad files.
#include <gtest/gtest.h>

#include "engine/llama_config.h"
#include "engine/llama_weights.h"
#include "engine/tiny_llama.h"
#include "model/error_text.h"

namespace ignis::engine {
namespace {

using test::GgufWriter;

LlamaConfig config_of(const GgufWriter& w) { return LlamaConfig::from_gguf(test::ParsedGguf(w.build()).file); }

// Only the keys every Llama file has; everything else takes its default.
GgufWriter minimal_writer() {
  GgufWriter w;
  w.add_string("general.architecture", "llama");
  w.add_scalar<std::uint32_t>("llama.block_count", 3);
  w.add_scalar<std::uint32_t>("llama.context_length", 128);
  w.add_scalar<std::uint32_t>("llama.embedding_length", 32);
  w.add_scalar<std::uint32_t>("llama.feed_forward_length", 48);
  w.add_scalar<std::uint32_t>("llama.attention.head_count", 4);
  w.add_array<std::string>("tokenizer.ggml.tokens", {"a", "b", "c"});
  return w;
}

TEST(LlamaConfig, ReadsEveryKey) {
  const test::TinyLlama m = test::make_tiny_llama({});
  const LlamaConfig c = config_of(test::tiny_llama_writer(m));
  EXPECT_EQ(c.architecture, "llama");
  EXPECT_EQ(c.n_layers, 2);
  EXPECT_EQ(c.dim, 24);
  EXPECT_EQ(c.ffn_dim, 40);
  EXPECT_EQ(c.n_heads, 4);
  EXPECT_EQ(c.n_kv_heads, 2);
  EXPECT_EQ(c.head_dim, 6);
  EXPECT_EQ(c.rotary_dim, 6);
  EXPECT_EQ(c.vocab_size, 37);
  EXPECT_EQ(c.context_length, 64);
  EXPECT_EQ(c.rope_theta, 10000.0);
  EXPECT_FLOAT_EQ(c.rms_eps, 1e-5f);
  EXPECT_EQ(c.rope_scaling.kind, RopeScalingKind::none);
  EXPECT_EQ(c.q_dim(), 24);
  EXPECT_EQ(c.kv_dim(), 12);
}

TEST(LlamaConfig, Defaults) {
  const LlamaConfig c = config_of(minimal_writer());
  EXPECT_EQ(c.n_kv_heads, 4);   // multi-head attention
  EXPECT_EQ(c.head_dim, 8);     // 32 / 4
  EXPECT_EQ(c.rotary_dim, 8);
  EXPECT_EQ(c.vocab_size, 3);   // from the tokenizer's token list
  EXPECT_EQ(c.rope_theta, 10000.0);
  EXPECT_FLOAT_EQ(c.rms_eps, 1e-5f);
}

TEST(LlamaConfig, RopeScaling) {
  GgufWriter linear = minimal_writer();
  linear.add_string("llama.rope.scaling.type", "linear");
  linear.add_scalar<float>("llama.rope.scaling.factor", 4.0f);
  LlamaConfig c = config_of(linear);
  EXPECT_EQ(c.rope_scaling.kind, RopeScalingKind::linear);
  EXPECT_EQ(c.rope_scaling.factor, 4.0);

  GgufWriter old = minimal_writer();
  old.add_scalar<float>("llama.rope.scale_linear", 2.0f);
  c = config_of(old);
  EXPECT_EQ(c.rope_scaling.kind, RopeScalingKind::linear);
  EXPECT_EQ(c.rope_scaling.factor, 2.0);

  GgufWriter yarn = minimal_writer();
  yarn.add_string("llama.rope.scaling.type", "yarn");
  yarn.add_scalar<float>("llama.rope.scaling.factor", 8.0f);
  yarn.add_scalar<std::uint32_t>("llama.rope.scaling.original_context_length", 16);
  c = config_of(yarn);
  EXPECT_EQ(c.rope_scaling.kind, RopeScalingKind::yarn);
  EXPECT_EQ(c.rope_scaling.factor, 8.0);
  EXPECT_EQ(c.rope_scaling.original_max_position_embeddings, 16);

  GgufWriter unknown = minimal_writer();
  unknown.add_string("llama.rope.scaling.type", "longrope");
  EXPECT_ERROR_CONTAINS(config_of(unknown),
                        "llama config: llama.rope.scaling.type: expected none, linear or yarn, got longrope");

  GgufWriter zero = minimal_writer();
  zero.add_string("llama.rope.scaling.type", "linear");
  zero.add_scalar<float>("llama.rope.scaling.factor", 0.0f);
  EXPECT_ERROR_CONTAINS(config_of(zero), "llama config: rope scaling:");
}

TEST(LlamaConfig, Errors) {
  GgufWriter qwen;
  qwen.add_string("general.architecture", "qwen2");
  EXPECT_ERROR_CONTAINS(config_of(qwen), "llama config: general.architecture: expected llama or mistral, got qwen2");
  EXPECT_ERROR_CONTAINS(config_of(GgufWriter{}), "llama config: general.architecture: expected a string key, got none");

  GgufWriter missing;
  missing.add_string("general.architecture", "llama");
  missing.add_scalar<std::uint32_t>("llama.block_count", 3);
  EXPECT_ERROR_CONTAINS(config_of(missing), "llama config: llama.embedding_length: expected an integer key, got none");

  // One bad u32 key added to a valid file, and the message it must give.
  const struct {
    const char* key;
    std::uint32_t value;
    const char* message;
  } bad_keys[] = {
      {"llama.attention.head_count_kv", 3,
       "llama config: attention.head_count_kv: expected a divisor of head_count 4, got 3"},
      {"llama.attention.key_length", 7, "llama config: head_dim: expected an even number, got 7"},
      {"llama.rope.dimension_count", 10,
       "llama config: rope.dimension_count: expected an even number in (0, head_dim = 8], got 10"},
      {"llama.attention.value_length", 16, "llama.attention.value_length: expected the key length 8, got 16"},
      {"llama.vocab_size", 0, "llama config: vocab_size: expected > 0, got 0"},
  };
  for (const auto& bad : bad_keys) {
    GgufWriter w = minimal_writer();
    w.add_scalar<std::uint32_t>(bad.key, bad.value);
    EXPECT_ERROR_CONTAINS(config_of(w), bad.message);
  }

  GgufWriter type = minimal_writer();
  type.add_string("llama.rope.freq_base", "big");
  EXPECT_ERROR_CONTAINS(config_of(type), "llama config: llama.rope.freq_base: type: expected f32, got string");
}

TEST(LlamaWeights, LoadsAndChecksShapes) {
  const test::TinyLlama m = test::make_tiny_llama({});
  const test::ParsedGguf p(test::tiny_llama_gguf(m));
  const LlamaConfig c = LlamaConfig::from_gguf(p.file);
  const LlamaWeights w = LlamaWeights::load(p.file, c, {WeightFormat::f32, QkOrder::gguf_interleaved});
  ASSERT_EQ(w.layers.size(), 2u);
  EXPECT_FALSE(w.output.has_value());
  EXPECT_EQ(&w.lm_head(), &w.token_embd);
  EXPECT_EQ(w.layers[1].wk.rows(), 12);
  EXPECT_EQ(w.layers[1].w_down.cols(), 40);
  // attn_v is stored as written; attn_k keeps GGUF's row order: GGUF row 1 is HF row 3 (head_dim 6).
  EXPECT_EQ(w.layers[0].wv.f32_data()[5], static_cast<float>(m.layers[0].wv[5]));
  EXPECT_EQ(w.layers[0].wk.f32_data()[1 * 24 + 2], static_cast<float>(m.layers[0].wk[3 * 24 + 2]));
  const LlamaWeights hf = LlamaWeights::load(p.file, c, {WeightFormat::bf16, QkOrder::hf_rotate_half});
  EXPECT_EQ(bf16_bits_to_float(hf.layers[0].wk.bf16_data()[3 * 24 + 2]),
            bf16_bits_to_float(float_to_bf16_bits(static_cast<float>(m.layers[0].wk[3 * 24 + 2]))));
  EXPECT_EQ(hf.layers[0].wk.bytes(), 12u * 24u * 2u);

  const test::Bytes bad = [&] {
    GgufWriter w = test::tiny_llama_writer(m);
    test::TinyLlama cut = m;
    cut.layers.pop_back();  // blk.1.* missing
    cut.spec.layers = 1;
    test::add_tiny_llama_tensors(w, cut);
    return w.build();
  }();
  const model::GgufFile bad_file = model::GgufFile::parse(bad);
  EXPECT_ERROR_CONTAINS(LlamaWeights::load(bad_file, c),
                        "llama weights: blk.1.attn_norm.weight: expected a tensor of shape [24], got none");

  test::TinyLlama wide = m;
  wide.spec.ffn = 41;
  for (test::TinyLayer& layer : wide.layers)
    for (auto* v : {&layer.gate, &layer.up, &layer.down}) v->resize(41 * 24);
  GgufWriter ww = test::tiny_llama_writer(m);
  test::add_tiny_llama_tensors(ww, wide);
  const test::Bytes wide_bytes = ww.build();
  const model::GgufFile wide_file = model::GgufFile::parse(wide_bytes);
  EXPECT_ERROR_CONTAINS(LlamaWeights::load(wide_file, c),
                        "llama weights: blk.0.ffn_gate.weight.shape: expected [40, 24], got [41, 24]");
}

}  // namespace
}  // namespace ignis::engine
