// Generation over the tiny model: greedy decoding against the fp64 reference, stop tokens, token
// limits, the context limit, the callback, seeded sampling, prefix reuse and timings.
#include <gtest/gtest.h>

#include <algorithm>

#include "engine/generator.h"
#include "engine/llama_model.h"
#include "engine/tiny_llama.h"
#include "model/error_text.h"

namespace ignis::engine {
namespace {

class GeneratorTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ModelOptions options;
    options.weights.format = WeightFormat::f32;
    model_ = LlamaModel::load(gguf_.file, options);
  }

  // Untied, so the logits are not dominated by the last token's own embedding: generation varies.
  const test::TinyLlama tiny_ = test::make_tiny_llama({.tied = false, .seed = 5});
  const test::ParsedGguf gguf_{test::tiny_llama_gguf(tiny_)};
  std::unique_ptr<LlamaModel> model_;
  const std::vector<std::int32_t> prompt_ = {3, 14, 15, 9, 26};
};

std::int32_t argmax(const std::vector<double>& row) {
  return static_cast<std::int32_t>(std::max_element(row.begin(), row.end()) - row.begin());
}

TEST_F(GeneratorTest, GreedyFollowsTheReferenceArgmax) {
  Generator gen(*model_);
  GenerateOptions o;
  o.max_new_tokens = 8;
  std::vector<std::int32_t> streamed;
  const GenerationResult r = gen.generate(prompt_, o, [&](std::int32_t id) {
    streamed.push_back(id);
    return true;
  });
  ASSERT_EQ(r.tokens.size(), 8u);
  EXPECT_EQ(r.reason, StopReason::max_tokens);
  EXPECT_EQ(streamed, r.tokens);
  std::vector<std::int32_t> context = prompt_;
  for (std::int32_t got : r.tokens) {
    const auto logits = test::ref_forward(tiny_, context).back();
    EXPECT_EQ(got, argmax(logits)) << "after " << context.size() << " tokens";
    context.push_back(argmax(logits));
  }
  // Greedy is deterministic, also from a fresh generator.
  Generator again(*model_);
  EXPECT_EQ(again.generate(prompt_, o).tokens, r.tokens);
  // The cache holds the prompt and every emitted token but the last (not fed yet).
  EXPECT_EQ(gen.cache().length(), static_cast<std::int64_t>(prompt_.size() + 7));
  EXPECT_EQ(gen.cached_tokens().size(), prompt_.size() + 7);
}

TEST_F(GeneratorTest, StopTokensAndLimits) {
  Generator gen(*model_);
  GenerateOptions o;
  o.max_new_tokens = 8;
  const std::vector<std::int32_t> greedy = gen.generate(prompt_, o).tokens;
  // Stop on a greedy token past the first that does not occur earlier.
  std::size_t at = 1;
  while (at < greedy.size() && std::find(greedy.begin(), greedy.begin() + static_cast<std::ptrdiff_t>(at),
                                         greedy[at]) != greedy.begin() + static_cast<std::ptrdiff_t>(at))
    ++at;
  ASSERT_LT(at, greedy.size()) << "the greedy tokens repeat one value; pick another seed";
  o.stop_ids = {greedy[at]};
  GenerationResult r = gen.generate(prompt_, o);
  EXPECT_EQ(r.reason, StopReason::stop_token);
  EXPECT_EQ(r.tokens, std::vector<std::int32_t>(greedy.begin(), greedy.begin() + static_cast<std::ptrdiff_t>(at)));

  o.stop_ids.clear();
  o.max_new_tokens = 3;
  r = gen.generate(prompt_, o);
  EXPECT_EQ(r.reason, StopReason::max_tokens);
  EXPECT_EQ(r.tokens, std::vector<std::int32_t>(greedy.begin(), greedy.begin() + 3));
  o.max_new_tokens = 0;
  EXPECT_TRUE(gen.generate(prompt_, o).tokens.empty());

  o.max_new_tokens = 8;
  int calls = 0;
  r = gen.generate(prompt_, o, [&](std::int32_t) { return ++calls < 2; });
  EXPECT_EQ(r.reason, StopReason::callback);
  EXPECT_EQ(r.tokens.size(), 2u);
}

TEST_F(GeneratorTest, ContextLimit) {
  Generator gen(*model_, /*max_seq=*/8);
  GenerateOptions o;
  o.max_new_tokens = 10;
  // 5 prompt tokens fill positions 0-4; tokens 2-4 are fed at positions 5-7; the 4th emitted
  // token would need position 8.
  const GenerationResult r = gen.generate(prompt_, o);
  EXPECT_EQ(r.reason, StopReason::context_full);
  EXPECT_EQ(r.tokens.size(), 4u);
  EXPECT_EQ(gen.cache().length(), 8);
  const std::vector<std::int32_t> long_prompt(9, 1);
  EXPECT_ERROR_CONTAINS(gen.generate(long_prompt, o), "context length exceeded: 9 > 8");
}

TEST_F(GeneratorTest, SeededSamplingIsReproducible) {
  Generator gen(*model_);
  GenerateOptions o;
  o.max_new_tokens = 24;
  o.temperature = 1.5;
  o.top_k = 30;
  o.top_p = 0.95;
  o.seed = 7;
  const auto a = gen.generate(prompt_, o).tokens;
  const auto b = gen.generate(prompt_, o).tokens;
  EXPECT_EQ(a, b);
  // Token i is the draw of step i: the same ids as a hand-written forward + sample loop.
  {
    KvCache cache = model_->make_cache();
    SamplingParams params;
    params.temperature = o.temperature;
    params.top_k = o.top_k;
    params.top_p = o.top_p;
    params.seed = o.seed;
    std::vector<std::int32_t> manual;
    std::int32_t id = model_->forward_sample(prompt_, cache, params);
    for (std::size_t i = 0; i < a.size(); ++i) {
      manual.push_back(id);
      params.step = i + 1;
      id = model_->forward_sample(std::span<const std::int32_t>(&manual.back(), 1), cache, params);
    }
    EXPECT_EQ(manual, a);
  }
  o.seed = 8;
  const auto c = gen.generate(prompt_, o).tokens;
  EXPECT_NE(a, c);
  o.temperature = 0.0;
  const auto greedy = gen.generate(prompt_, o).tokens;
  EXPECT_NE(a, greedy);
  // top_k = 1 is greedy whatever the temperature and seed.
  o.temperature = 2.0;
  o.top_k = 1;
  EXPECT_EQ(gen.generate(prompt_, o).tokens, greedy);
}

TEST_F(GeneratorTest, ReusesTheCachedPrefix) {
  Generator gen(*model_);
  GenerateOptions o;
  o.max_new_tokens = 4;
  const GenerationResult first = gen.generate(prompt_, o);
  EXPECT_EQ(first.stats.reused_tokens, 0);
  EXPECT_EQ(first.stats.prefill_tokens, 5);

  // The next turn: everything so far plus new tokens. Only the new part runs.
  std::vector<std::int32_t> turn = prompt_;
  turn.insert(turn.end(), first.tokens.begin(), first.tokens.end());
  turn.insert(turn.end(), {7, 8});
  const GenerationResult second = gen.generate(turn, o);
  EXPECT_EQ(second.stats.reused_tokens, 8);  // prompt + 3 fed tokens; the 4th was never fed
  EXPECT_EQ(second.stats.prefill_tokens, static_cast<std::int64_t>(turn.size()) - 8);
  Generator fresh(*model_);
  EXPECT_EQ(fresh.generate(turn, o).tokens, second.tokens);

  // The same context again: everything but the last token is reused.
  const GenerationResult again = gen.generate(turn, o);
  EXPECT_EQ(again.stats.reused_tokens, static_cast<std::int64_t>(turn.size()) - 1);
  EXPECT_EQ(again.tokens, second.tokens);

  // A context that diverges early drops the rest of the cache.
  const std::vector<std::int32_t> other = {3, 14, 2};
  const GenerationResult diverged = gen.generate(other, o);
  EXPECT_EQ(diverged.stats.reused_tokens, 2);
  EXPECT_EQ(diverged.tokens, fresh.generate(other, o).tokens);
}

TEST_F(GeneratorTest, StatsAndBadOptions) {
  Generator gen(*model_);
  GenerateOptions o;
  o.max_new_tokens = 6;
  const GenerationStats s = gen.generate(prompt_, o).stats;
  EXPECT_EQ(s.context_tokens, 5);
  EXPECT_EQ(s.generated_tokens, 6);
  EXPECT_GT(s.ttft_s, 0.0);
  EXPECT_GE(s.ttft_s, s.prefill_s);
  EXPECT_GT(s.tbt_mean_s, 0.0);
  EXPECT_GT(s.tbt_median_s, 0.0);
  EXPECT_NEAR(s.decode_tokens_per_s, 1.0 / s.tbt_mean_s, 1e-9 / s.tbt_mean_s);
  EXPECT_GT(s.prefill_tokens_per_s, 0.0);

  GenerateOptions bad;
  bad.temperature = -1.0;
  EXPECT_ERROR_CONTAINS(gen.generate(prompt_, bad), "generate: temperature: expected a finite value >= 0, got -1");
  bad = {};
  bad.top_p = 0.0;
  EXPECT_ERROR_CONTAINS(gen.generate(prompt_, bad), "generate: top_p: expected a value in (0, 1], got 0");
  bad = {};
  bad.top_k = -2;
  EXPECT_ERROR_CONTAINS(gen.generate(prompt_, bad), "generate: top_k");
  bad = {};
  bad.max_new_tokens = -1;
  EXPECT_ERROR_CONTAINS(gen.generate(prompt_, bad), "generate: max_new_tokens");
  EXPECT_ERROR_CONTAINS(gen.generate({}, o), "generate: context: expected at least one token");
}

}  // namespace
}  // namespace ignis::engine
