// Gpt2Config from Hugging Face config.json text: the keys read, defaults, and every rejection.
#include <gtest/gtest.h>

#include "engine/gpt2_config.h"
#include "engine/tiny_gpt2.h"
#include "model/error_text.h"

namespace ignis::engine {
namespace {

using nlohmann::json;

Gpt2Config parse(const json& j) { return Gpt2Config::from_json_text(j.dump(), "cfg.json"); }

TEST(Gpt2Config, ReadsTheHuggingFaceKeys) {
  const Gpt2Config c = parse(test::tiny_gpt2_config({}));
  EXPECT_EQ(c.n_layers, 2);
  EXPECT_EQ(c.n_heads, 4);
  EXPECT_EQ(c.dim, 16);
  EXPECT_EQ(c.head_dim(), 4);
  EXPECT_EQ(c.ffn_dim, 40);
  EXPECT_EQ(c.n_positions, 24);
  EXPECT_EQ(c.vocab_size, test::kTinyVocab);
  EXPECT_FLOAT_EQ(c.ln_eps, 1e-5f);
  EXPECT_TRUE(c.scale_attn_weights);
}

TEST(Gpt2Config, DefaultsOfTransformers) {
  // The keys of gpt2 (124M) that matter, with n_inner null and no epsilon or activation.
  const json j = {{"n_layer", 12}, {"n_head", 12}, {"n_embd", 768}, {"n_positions", 1024},
                  {"vocab_size", 50257}, {"n_inner", nullptr}};
  const Gpt2Config c = parse(j);
  EXPECT_EQ(c.ffn_dim, 4 * 768);
  EXPECT_FLOAT_EQ(c.ln_eps, 1e-5f);
  EXPECT_EQ(c.head_dim(), 64);
  json other = j;
  other["activation_function"] = "gelu_pytorch_tanh";
  other["layer_norm_epsilon"] = 1e-6;
  other["scale_attn_weights"] = false;
  const Gpt2Config d = parse(other);
  EXPECT_FLOAT_EQ(d.ln_eps, 1e-6f);
  EXPECT_FALSE(d.scale_attn_weights);
}

TEST(Gpt2Config, RejectsBadValuesNamingTheKey) {
  const json base = test::tiny_gpt2_config({});
  auto expect_error = [&](const char* key, const json& value, const std::string& text) {
    json j = base;
    if (value.is_discarded())
      j.erase(key);
    else
      j[key] = value;
    SCOPED_TRACE(key);
    EXPECT_ERROR_CONTAINS(parse(j), text);
  };
  const json missing = json(json::value_t::discarded);
  expect_error("n_layer", missing, "gpt2 config: cfg.json: n_layer: expected an integer, got none");
  expect_error("n_head", "4", "cfg.json: n_head: expected an integer, got \"4\"");
  expect_error("n_embd", 2.5, "n_embd: expected an integer, got 2.5");
  expect_error("n_embd", 18, "n_embd: expected a multiple of n_head 4, got 18");
  expect_error("n_head", 0, "n_head: expected a value in [1, 2^31], got 0");
  expect_error("n_positions", -3, "n_positions: expected a value in [1, 2^31], got -3");
  expect_error("n_inner", std::int64_t{1} << 40, "n_inner: expected a value in [1, 2^31]");
  expect_error("vocab_size", std::int64_t{1} << 31, "vocab_size: expected <= 2^30");
  expect_error("layer_norm_epsilon", "small", "layer_norm_epsilon: expected a number");
  expect_error("layer_norm_epsilon", -1.0, "layer_norm_epsilon: expected a finite value >= 0");
  expect_error("activation_function", "relu", "activation_function: expected gelu_new (the tanh GELU), got relu");
  expect_error("activation_function", "gelu", "activation_function: expected gelu_new");
  expect_error("model_type", "llama", "model_type: expected gpt2, got llama");
  expect_error("add_cross_attention", true, "add_cross_attention: expected false");
  expect_error("scale_attn_by_inverse_layer_idx", true, "scale_attn_by_inverse_layer_idx: expected false, got true");
  expect_error("scale_attn_weights", 1, "scale_attn_weights: expected true or false, got 1");
}

TEST(Gpt2Config, RejectsBadFiles) {
  EXPECT_ERROR_CONTAINS(Gpt2Config::from_json_text("{\"n_layer\": ", "cfg.json"), "cfg.json: not valid JSON");
  EXPECT_ERROR_CONTAINS(Gpt2Config::from_json_text("[1, 2]", "cfg.json"), "cfg.json: expected a JSON object");
  EXPECT_ERROR_CONTAINS(Gpt2Config::from_file("/nonexistent/config.json"),
                        "gpt2 config: /nonexistent/config.json: cannot open");
  Gpt2Config c = parse(test::tiny_gpt2_config({}));
  c.n_heads = 3;
  EXPECT_ERROR_CONTAINS(c.validate(), "gpt2 config: n_embd: expected a multiple of n_head 3, got 16");
}

}  // namespace
}  // namespace ignis::engine
