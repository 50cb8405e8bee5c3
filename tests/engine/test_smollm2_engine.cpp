// The bundled SmolLM2-135M-Instruct through the engine: it loads, its logits are finite, bf16
// and q8 weight storage keep the f32 model's predictions, and it answers a question. Skipped
// when the file is absent.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>

#include "engine/generator.h"
#include "engine/llama_model.h"
#include "harness/max_error.h"
#include "model/model_paths.h"

namespace ignis::engine {
namespace {

std::int64_t argmax(std::span<const float> row) {
  return std::max_element(row.begin(), row.end()) - row.begin();
}

// Logits of every position for `ids`, from a model loaded with `format`.
std::vector<float> all_logits(const model::GgufFile& file, WeightFormat format, const std::vector<std::int32_t>& ids) {
  ModelOptions options;
  options.weights.format = format;
  auto model = LlamaModel::load(file, options);
  KvCache cache = model->make_cache(64);
  const auto logits = model->forward(ids, cache, true);
  return {logits.begin(), logits.end()};
}

TEST(SmolLM2Engine, Bf16AndQ8KeepTheF32Predictions) {
  const std::string path = test::find_smollm2();
  if (path.empty()) GTEST_SKIP() << "SmolLM2 GGUF not found (scripts/setup.sh fetches it)";
  const model::GgufFile file = model::GgufFile::open(path);
  auto model = LlamaModel::load(file, {});
  const LlamaConfig& c = model->config();
  EXPECT_EQ(c.n_layers, 30);
  EXPECT_EQ(c.head_dim, 64);
  EXPECT_EQ(c.vocab_size, 49152);
  EXPECT_FALSE(model->weights().output.has_value());  // tied lm head

  // A chat prompt spelled with whole tokens of the vocabulary (GPT-2 byte-level: "Ġ" is a
  // leading space, "Ċ" a newline), so no tokenizer is needed; real text makes predictions confident.
  const auto vocab_tokens = file.get_array<std::string>("tokenizer.ggml.tokens");
  std::vector<std::int32_t> ids;
  for (const char* piece : {"<|im_start|>", "user", "Ċ", "What", "Ġis", "Ġthe", "Ġcapital", "Ġof", "ĠFrance", "?",
                            "<|im_end|>", "Ċ", "<|im_start|>", "ass", "istant", "Ċ"}) {
    const auto it = std::find(vocab_tokens.begin(), vocab_tokens.end(), piece);
    ASSERT_NE(it, vocab_tokens.end()) << piece;
    ids.push_back(static_cast<std::int32_t>(it - vocab_tokens.begin()));
  }
  const std::vector<float> a = all_logits(file, WeightFormat::f32, ids);
  for (const WeightFormat format : {WeightFormat::bf16, WeightFormat::q8}) {
    SCOPED_TRACE(weight_format_name(format));
    const std::vector<float> b = all_logits(file, format, ids);
    const std::size_t vocab = static_cast<std::size_t>(c.vocab_size);
    int agree = 0;
    for (std::size_t t = 0; t < ids.size(); ++t) {
      const std::span<const float> ra(a.data() + t * vocab, vocab), rb(b.data() + t * vocab, vocab);
      for (float v : ra) ASSERT_TRUE(std::isfinite(v)) << t;
      agree += argmax(ra) == argmax(rb);
      double err = 0.0, scale = 0.0;
      for (std::size_t i = 0; i < vocab; ++i) {
        test::take_worse(err, std::abs(static_cast<double>(ra[i]) - rb[i]));
        scale = std::max(scale, std::abs(static_cast<double>(ra[i])));
      }
      EXPECT_LT(err, 0.05 * scale) << "position " << t;
    }
    EXPECT_GE(agree, static_cast<int>(ids.size()) - 2);
  }

  Generator gen(*model, 64);
  GenerateOptions o;
  o.max_new_tokens = 8;
  const GenerationResult r = gen.generate(ids, o);
  ASSERT_EQ(r.tokens.size(), 8u);
  // "The capital of France is Paris." with the default (q8) weights.
  const auto paris = std::find(vocab_tokens.begin(), vocab_tokens.end(), "ĠParis") - vocab_tokens.begin();
  EXPECT_NE(std::find(r.tokens.begin(), r.tokens.end(), paris), r.tokens.end());
  std::printf("greedy continuation:");
  for (std::int32_t id : r.tokens) std::printf(" %s", vocab_tokens[static_cast<std::size_t>(id)].c_str());
  std::printf("\n");
}

}  // namespace
}  // namespace ignis::engine
