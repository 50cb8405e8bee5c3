// The CPU engine's GPT-2 and the tokenizer against Hugging Face transformers and tokenizers (an
// independent implementation): tests/engine/data/gpt2_tiny/ holds a random GPT2LMHeadModel saved
// by save_pretrained, its tokenizer.json, and golden ids and logits, all written by
// scripts/hf_gpt2_golden.py on the GPU machine. Skipped when that folder is absent.
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>

#include "engine/generator.h"
#include "engine/gpt2_model.h"
#include "harness/max_error.h"
#include "model/model_paths.h"
#include "model/tokenizer.h"

namespace ignis::engine {
namespace {

struct Golden {
  std::string prompt;
  std::vector<std::int32_t> prompt_ids, greedy_float64, greedy_float32;
  std::int64_t vocab = 0, rows = 0;
  std::vector<float> logits;  // [rows, vocab]: every position of prompt_ids + greedy_float64[:-1]
};

std::filesystem::path golden_dir() { return test::source_root() / "tests/engine/data/gpt2_tiny"; }

Golden load_golden() {
  std::ifstream json_file(golden_dir() / "golden.json");
  const nlohmann::json j = nlohmann::json::parse(json_file);
  Golden g;
  g.prompt = j.at("prompt").get<std::string>();
  g.prompt_ids = j.at("prompt_ids").get<std::vector<std::int32_t>>();
  g.greedy_float64 = j.at("greedy_float64").get<std::vector<std::int32_t>>();
  g.greedy_float32 = j.at("greedy_float32").get<std::vector<std::int32_t>>();
  g.vocab = j.at("vocab_size").get<std::int64_t>();
  g.rows = j.at("logits_rows").get<std::int64_t>();
  std::ifstream logits_file(golden_dir() / "logits.f32", std::ios::binary);
  g.logits.resize(static_cast<std::size_t>(g.rows * g.vocab));
  logits_file.read(reinterpret_cast<char*>(g.logits.data()),
                   static_cast<std::streamsize>(g.logits.size() * sizeof(float)));
  EXPECT_TRUE(logits_file) << "logits.f32 is shorter than golden.json says";
  return g;
}

class Gpt2Golden : public testing::Test {
 protected:
  void SetUp() override {
    // Committed data: missing is a failure, not a skip.
    if (!std::filesystem::exists(golden_dir() / "golden.json"))
      FAIL() << golden_dir().string() << " not found (committed; scripts/hf_gpt2_golden.py writes it on the GPU "
                                          "machine)";
    golden_ = load_golden();
    ModelOptions options;
    options.weights.format = WeightFormat::f32;
    model_ = Gpt2Model::load(golden_dir().string(), options);
  }
  Golden golden_;
  std::unique_ptr<Gpt2Model> model_;
};

TEST_F(Gpt2Golden, PromptTokenizesLikeHuggingFace) {
  const auto tok = model::Tokenizer::from_hf_json((golden_dir() / "tokenizer.json").string());
  EXPECT_EQ(tok.vocab_size(), golden_.vocab);
  EXPECT_EQ(tok.encode(golden_.prompt), golden_.prompt_ids);
  EXPECT_EQ(tok.decode(golden_.prompt_ids), golden_.prompt);
}

// Every position of the prompt and of the greedy continuation, in one prefill.
TEST_F(Gpt2Golden, F32LogitsMatchTransformersWithin1e4) {
  ASSERT_EQ(model_->vocab_size(), golden_.vocab);
  std::vector<std::int32_t> fed = golden_.prompt_ids;
  fed.insert(fed.end(), golden_.greedy_float64.begin(), golden_.greedy_float64.end() - 1);
  ASSERT_EQ(static_cast<std::int64_t>(fed.size()), golden_.rows);
  KvCache cache = model_->make_cache();
  const std::span<const float> logits = model_->forward(fed, cache, /*all_logits=*/true);
  ASSERT_EQ(logits.size(), golden_.logits.size());
  double worst = 0.0;
  for (std::int64_t r = 0; r < golden_.rows; ++r) {
    double err = 0.0, scale = 0.0;
    for (std::int64_t v = 0; v < golden_.vocab; ++v) {
      const auto i = static_cast<std::size_t>(r * golden_.vocab + v);
      test::take_worse(err, std::abs(static_cast<double>(logits[i]) - golden_.logits[i]));
      scale = std::max(scale, std::abs(static_cast<double>(golden_.logits[i])));
    }
    EXPECT_LT(err / scale, 1e-4) << "position " << r;
    worst = std::max(worst, err / scale);
  }
  std::printf("largest |logit - transformers| / max |logit| over %lld positions: %.3g\n",
              static_cast<long long>(golden_.rows), worst);
}

// A golden run that repeats one token would let a decode step that ignores the cache pass the test
// below; scripts/hf_gpt2_golden.py picks its seed for at least 8 distinct tokens.
TEST_F(Gpt2Golden, GreedyRunHasSeveralDistinctTokens) {
  std::vector<std::int32_t> distinct = golden_.greedy_float64;
  std::sort(distinct.begin(), distinct.end());
  distinct.erase(std::unique(distinct.begin(), distinct.end()), distinct.end());
  EXPECT_GE(distinct.size(), 8u);
}

// Through the generator: prefill, then one token at a time through the KV cache.
TEST_F(Gpt2Golden, F32GreedyMatchesTransformersFor32Tokens) {
  ASSERT_EQ(golden_.greedy_float32, golden_.greedy_float64) << "the golden run itself is ambiguous";
  Generator generator(*model_);
  GenerateOptions greedy;
  greedy.max_new_tokens = static_cast<std::int64_t>(golden_.greedy_float64.size());  // no stop ids: all 32
  const GenerationResult result = generator.generate(golden_.prompt_ids, greedy);
  EXPECT_EQ(result.tokens, golden_.greedy_float64);
}

}  // namespace
}  // namespace ignis::engine
