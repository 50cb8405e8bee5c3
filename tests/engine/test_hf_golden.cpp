// The CPU engine and tokenizer against Hugging Face transformers on the same GGUF (an
// independent implementation): tests/engine/data/smollm2_golden.json and smollm2_hf_logits.f32
// were produced by scripts/hf_golden.py on the GPU machine (transformers 5.17, torch 2.11, CPU).
// Skipped when the bundled model is absent.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>

#include "engine/generator.h"
#include "engine/hf_golden.h"
#include "engine/llama_model.h"
#include "harness/max_error.h"
#include "model/model_paths.h"
#include "model/tokenizer.h"

namespace ignis::engine {
namespace {

using Golden = test::HfGoldenData;

class HfGolden : public testing::Test {
 protected:
  void SetUp() override {
    path_ = test::find_smollm2();
    if (path_.empty()) GTEST_SKIP() << "SmolLM2 GGUF not found (scripts/setup.sh fetches it)";
    golden_ = test::load_hf_golden();
  }
  std::string path_;
  Golden golden_;
};

TEST_F(HfGolden, ChatPromptTokenizesLikeTransformers) {
  const model::GgufFile file = model::GgufFile::open(path_);
  const auto tokenizer = model::Tokenizer::from_gguf(file);
  const std::vector<model::ChatMessage> messages = {{"user", golden_.prompt}};
  EXPECT_EQ(tokenizer.encode(tokenizer.apply_chat_template(messages, true)), golden_.prompt_ids);
}

TEST_F(HfGolden, F32LogitsMatchTransformersWithin1e3) {
  const model::GgufFile file = model::GgufFile::open(path_);
  ModelOptions options;
  options.weights.format = WeightFormat::f32;
  auto model = LlamaModel::load(file, options);
  KvCache cache = model->make_cache(128);
  const std::span<const float> logits = model->forward(golden_.prompt_ids, cache);
  ASSERT_EQ(logits.size(), golden_.last_logits.size());
  double err = 0.0, scale = 0.0;
  for (std::size_t i = 0; i < logits.size(); ++i) {
    test::take_worse(err, std::abs(static_cast<double>(logits[i]) - golden_.last_logits[i]));
    scale = std::max(scale, std::abs(static_cast<double>(golden_.last_logits[i])));
  }
  std::printf("max |logit - transformers| = %.3g, max |logit| = %.3g, relative %.3g\n", err, scale, err / scale);
  EXPECT_LT(err / scale, 1e-3);
}

TEST_F(HfGolden, F32GreedyMatchesTransformersFor64Tokens) {
  ASSERT_EQ(golden_.greedy_float32, golden_.greedy_float64) << "the golden run itself is ambiguous";
  const model::GgufFile file = model::GgufFile::open(path_);
  ModelOptions options;
  options.weights.format = WeightFormat::f32;
  auto model = LlamaModel::load(file, options);
  Generator generator(*model, 256);
  GenerateOptions greedy;
  greedy.max_new_tokens = static_cast<std::int64_t>(golden_.greedy_float32.size());  // no stop ids: all 64
  const GenerationResult result = generator.generate(golden_.prompt_ids, greedy);
  EXPECT_EQ(result.tokens, golden_.greedy_float32);
}

}  // namespace
}  // namespace ignis::engine
