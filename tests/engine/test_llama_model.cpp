// The engine's Llama forward pass against the independent fp64 model of tiny_llama.h.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>

#include "engine/llama_model.h"
#include "engine/logits_check.h"
#include "engine/tiny_llama.h"
#include "model/error_text.h"

namespace ignis::engine {
namespace {

using test::TinyLlama;
using test::TinyLlamaSpec;

struct Loaded {
  Loaded(const TinyLlama& m, WeightFormat format, QkOrder order, int threads) : gguf(test::tiny_llama_gguf(m)) {
    ModelOptions options;
    options.threads = threads;
    options.weights.format = format;
    options.weights.qk_order = order;
    model = LlamaModel::load(gguf.file, options);
  }
  test::ParsedGguf gguf;
  std::unique_ptr<LlamaModel> model;
};

Loaded load(const TinyLlama& m, WeightFormat format = WeightFormat::f32,
            QkOrder order = QkOrder::gguf_interleaved, int threads = 2) {
  return Loaded(m, format, order, threads);
}

using test::kF32Tol;
using test::row_error;
using test::some_tokens;

void expect_all_logits_match(LlamaModel& model, const TinyLlama& ref_model, const std::vector<std::int32_t>& tokens,
                             double tol) {
  test::expect_all_logits_match(model, tokens, test::ref_forward(ref_model, tokens), tol);
}

TEST(LlamaModel, LogitsMatchFp64ReferenceGqa) {
  const TinyLlama m = test::make_tiny_llama({});
  Loaded l = load(m);
  expect_all_logits_match(*l.model, m, some_tokens(9, m.spec.vocab, 11), kF32Tol);
}

TEST(LlamaModel, LogitsMatchFp64ReferenceMhaMqaAndUntied) {
  for (const std::int64_t kv_heads : {4, 1}) {
    TinyLlamaSpec s;
    s.kv_heads = kv_heads;
    s.tied = kv_heads == 1;
    s.seed = 20 + static_cast<std::uint64_t>(kv_heads);
    const TinyLlama m = test::make_tiny_llama(s);
    Loaded l = load(m);
    SCOPED_TRACE("kv_heads " + std::to_string(kv_heads));
    expect_all_logits_match(*l.model, m, some_tokens(7, s.vocab, 12), kF32Tol);
  }
}

TEST(LlamaModel, LastLogitsOnlyAndOneThread) {
  const TinyLlama m = test::make_tiny_llama({});
  Loaded l = load(m, WeightFormat::f32, QkOrder::gguf_interleaved, /*threads=*/1);
  const auto tokens = some_tokens(5, m.spec.vocab, 13);
  KvCache cache = l.model->make_cache();
  const auto logits = l.model->forward(tokens, cache);
  ASSERT_EQ(logits.size(), static_cast<std::size_t>(m.spec.vocab));
  EXPECT_LT(row_error(logits, test::ref_forward(m, tokens).back()), kF32Tol);
}

// Feeding tokens one at a time (and in uneven chunks) through the cache gives the logits of the
// full recomputation at every position.
TEST(LlamaModel, IncrementalDecodeEqualsFullRecompute) {
  const TinyLlama m = test::make_tiny_llama({});
  Loaded l = load(m);
  const auto tokens = some_tokens(10, m.spec.vocab, 14);
  const auto want = test::ref_forward(m, tokens);
  KvCache cache = l.model->make_cache();
  const std::vector<std::size_t> chunks = {3, 1, 1, 4, 1};
  std::size_t at = 0;
  for (std::size_t chunk : chunks) {
    const std::span<const std::int32_t> part(tokens.data() + at, chunk);
    const auto logits = l.model->forward(part, cache);
    at += chunk;
    EXPECT_LT(row_error(logits, want[at - 1]), kF32Tol) << "after " << at << " tokens";
  }
  EXPECT_EQ(cache.length(), 10);
}

// GGUF rows with interleaved RoPE and HF rows (unpermuted at load) with rotate-half RoPE are
// the same model: every layer's attention must agree, so the logits do.
TEST(LlamaModel, QkOrdersGiveTheSameModel) {
  const TinyLlama m = test::make_tiny_llama({});
  Loaded gguf = load(m, WeightFormat::f32, QkOrder::gguf_interleaved);
  Loaded hf = load(m, WeightFormat::f32, QkOrder::hf_rotate_half);
  const auto tokens = some_tokens(8, m.spec.vocab, 15);
  KvCache c1 = gguf.model->make_cache(), c2 = hf.model->make_cache();
  const auto a = gguf.model->forward(tokens, c1, true);
  const std::vector<float> first(a.begin(), a.end());
  const auto b = hf.model->forward(tokens, c2, true);
  double err = 0.0, scale = 1.0;
  for (std::size_t i = 0; i < first.size(); ++i) {
    test::take_worse(err, std::abs(static_cast<double>(first[i]) - b[i]));
    scale = std::max(scale, std::abs(static_cast<double>(first[i])));
  }
  EXPECT_LT(err / scale, 1e-5);
  // The caches differ (K rows in another order within each head) but the attention does not.
  const std::int64_t hd = m.spec.head_dim;
  const float* k_gguf = c1.k_rows(0, 3);
  const float* k_hf = c2.k_rows(0, 3);
  EXPECT_NEAR(k_gguf[1], k_hf[hd / 2], 1e-5);  // GGUF row 1 = HF row head_dim/2 (pair 0, second half)
  expect_all_logits_match(*hf.model, m, tokens, kF32Tol);
}

TEST(LlamaModel, Bf16WeightsMatchReferenceOnRoundedWeights) {
  TinyLlamaSpec s;
  s.dim = 40;  // rows of 40 bf16: the AVX2 kernel's 32-wide loop, its 8-wide loop and none left
  s.head_dim = 10;
  s.ffn = 67;  // ffn_down rows of 67: a scalar tail after the vector loops
  s.tied = false;
  const TinyLlama m = test::make_tiny_llama(s);
  const TinyLlama rounded = test::rounded_to_bf16(m);
  Loaded l = load(m, WeightFormat::bf16);
  // 9 tokens at once: the widened sgemm path; then one at a time: the matvec path.
  const auto tokens = some_tokens(12, s.vocab, 16);
  const auto want = test::ref_forward(rounded, tokens);
  KvCache cache = l.model->make_cache();
  auto logits = l.model->forward(std::span(tokens).first(9), cache, true);
  for (std::size_t t = 0; t < 9; ++t)
    EXPECT_LT(
        row_error(logits.subspan(t * static_cast<std::size_t>(s.vocab), static_cast<std::size_t>(s.vocab)), want[t]),
        kF32Tol)
        << t;
  for (std::size_t t = 9; t < 12; ++t) {
    logits = l.model->forward(std::span(tokens).subspan(t, 1), cache);
    EXPECT_LT(row_error(logits, want[t]), kF32Tol) << t;
  }
  // And bf16 rounding is visible against the unrounded model (the test can tell them apart).
  EXPECT_GT(row_error(logits, test::ref_forward(m, tokens).back()), 10 * kF32Tol);
}

TEST(LlamaModel, ContextOverflowThrowsAndLeavesTheCache) {
  const TinyLlama m = test::make_tiny_llama({});
  Loaded l = load(m);
  KvCache cache = l.model->make_cache(5);
  const auto tokens = some_tokens(3, m.spec.vocab, 17);
  l.model->forward(tokens, cache);
  EXPECT_ERROR_CONTAINS(l.model->forward(tokens, cache), "context length exceeded: 3 + 3 > 5");
  EXPECT_EQ(cache.length(), 3);
  l.model->forward(std::span(tokens).first(2), cache);
  EXPECT_EQ(cache.length(), 5);
  EXPECT_ERROR_CONTAINS(l.model->forward(std::span(tokens).first(1), cache), "context length exceeded: 5 + 1 > 5");
}

TEST(LlamaModel, BadArguments) {
  const TinyLlama m = test::make_tiny_llama({});
  Loaded l = load(m);
  KvCache cache = l.model->make_cache();
  const std::vector<std::int32_t> bad = {1, 37};
  EXPECT_ERROR_CONTAINS(l.model->forward(bad, cache),
                        "LlamaModel::forward: tokens[1]: expected an id in [0, 37), got 37");
  const std::vector<std::int32_t> negative = {-1};
  EXPECT_ERROR_CONTAINS(l.model->forward(negative, cache), "got -1");
  EXPECT_ERROR_CONTAINS(l.model->forward({}, cache), "tokens: expected at least one token");
  KvCache other(1, 8, 2, 6);
  const std::vector<std::int32_t> ok = {1};
  EXPECT_ERROR_CONTAINS(l.model->forward(ok, other), "cache: expected a cache made by this model's make_cache");
  EXPECT_EQ(cache.length(), 0);

  ModelOptions cuda;
  cuda.device = Device::cuda(0);
  EXPECT_ERROR_CONTAINS(LlamaModel::load(l.gguf.file, cuda), "weights.format: expected f32 or bf16 on cuda:0, got q8");
}

}  // namespace
}  // namespace ignis::engine
