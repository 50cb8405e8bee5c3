// The CUDA Llama engine: the tiny random Llama on CUDA against the CPU engine (prefill and every
// decode step), graph replay against plain launches, the bf16 mode, and the bundled SmolLM2
// against Hugging Face transformers (tests/engine/data), plus a timing run. Skipped without a GPU.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>

#include "engine/generator.h"
#include "engine/hf_golden.h"
#include "engine/llama_model.h"
#include "engine/logits_check.h"
#include "engine/tiny_llama.h"
#include "harness/max_error.h"
#include "ignis/device.h"
#include "model/error_text.h"
#include "model/model_paths.h"

namespace ignis::engine {
namespace {

using test::some_tokens;
using test::TinyLlama;
using test::TinyLlamaSpec;

#define IGNIS_SKIP_WITHOUT_GPU()                  \
  do {                                            \
    if (!cuda_available()) GTEST_SKIP() << "no CUDA GPU"; \
  } while (0)

std::unique_ptr<LlamaModel> load_model(const model::GgufFile& file, Device device, WeightFormat format,
                                       bool graphs = true) {
  ModelOptions options;
  options.device = device;
  options.threads = 1;
  options.weights.format = format;
  options.cuda_graphs = graphs;
  return LlamaModel::load(file, options);
}

// Largest |got - want| over a row, relative to the row's largest |want|; infinite where any logit is NaN.
double relative_error(std::span<const float> got, std::span<const float> want) {
  double err = 0.0, scale = 0.0;
  for (std::size_t i = 0; i < want.size(); ++i) {
    test::take_worse(err, std::abs(static_cast<double>(got[i]) - want[i]));
    scale = std::max(scale, std::abs(static_cast<double>(want[i])));
  }
  return err / scale;
}

std::vector<float> copy_of(std::span<const float> s) { return {s.begin(), s.end()}; }

// Prefill (every position's logits) then `steps` decode steps of fixed tokens, on the CPU and on
// CUDA; every logits row must agree within `tol`.
void expect_cuda_matches_cpu(const TinyLlama& m, WeightFormat format, double tol, bool graphs) {
  const test::ParsedGguf gguf(test::tiny_llama_gguf(m));
  auto cpu = load_model(gguf.file, Device::cpu(), format);
  auto gpu = load_model(gguf.file, Device::cuda(0), format, graphs);
  KvCache cpu_cache = cpu->make_cache(32), gpu_cache = gpu->make_cache(32);
  const std::size_t vocab = static_cast<std::size_t>(m.spec.vocab);
  const auto prompt = some_tokens(9, m.spec.vocab, 5);
  const auto want = copy_of(cpu->forward(prompt, cpu_cache, true));
  const auto got = copy_of(gpu->forward(prompt, gpu_cache, true));
  ASSERT_EQ(got.size(), want.size());
  for (std::size_t t = 0; t < prompt.size(); ++t)
    EXPECT_LT(relative_error(std::span(got).subspan(t * vocab, vocab), std::span(want).subspan(t * vocab, vocab)), tol)
        << "prefill position " << t;
  for (std::int32_t token : some_tokens(8, m.spec.vocab, 6)) {
    const std::vector<std::int32_t> one = {token};
    const auto want_step = copy_of(cpu->forward(one, cpu_cache));
    const auto got_step = copy_of(gpu->forward(one, gpu_cache));
    EXPECT_LT(relative_error(got_step, want_step), tol) << "decode at length " << cpu_cache.length();
  }
  EXPECT_EQ(gpu_cache.length(), cpu_cache.length());
  if (graphs) {
    EXPECT_GT(gpu->cuda_graph_replays(), 0) << "decode steps never replayed a captured graph";
  }
}

TEST(CudaEngine, TinyF32MatchesTheCpuEngine) {
  IGNIS_SKIP_WITHOUT_GPU();
  expect_cuda_matches_cpu(test::make_tiny_llama({}), WeightFormat::f32, 1e-4, true);
  TinyLlamaSpec untied;
  untied.tied = false;
  untied.heads = 6;
  untied.kv_heads = 3;
  untied.head_dim = 8;
  untied.seed = 2;
  expect_cuda_matches_cpu(test::make_tiny_llama(untied), WeightFormat::f32, 1e-4, false);
}

// bf16 weights on both; on CUDA the linear layers' inputs are rounded to bf16 too (8 bits of
// mantissa, ~0.4% per rounding), the CPU keeps them f32.
TEST(CudaEngine, TinyBf16IsCloseToTheCpuEngine) {
  IGNIS_SKIP_WITHOUT_GPU();
  expect_cuda_matches_cpu(test::make_tiny_llama({}), WeightFormat::bf16, 3e-2, true);
}

// Same kernels in the same order: replayed steps give the same bits as plain launches, across a
// second turn that truncates the cache to the common prefix (the device lengths are rewritten).
TEST(CudaEngine, GraphReplayEqualsPlainLaunches) {
  IGNIS_SKIP_WITHOUT_GPU();
  TinyLlamaSpec spec;
  spec.seed = 3;
  const TinyLlama m = test::make_tiny_llama(spec);
  const test::ParsedGguf gguf(test::tiny_llama_gguf(m));
  auto graphed = load_model(gguf.file, Device::cuda(0), WeightFormat::f32, true);
  auto plain = load_model(gguf.file, Device::cuda(0), WeightFormat::f32, false);

  KvCache a = graphed->make_cache(40), b = plain->make_cache(40);
  const auto prompt = some_tokens(5, spec.vocab, 7);
  EXPECT_EQ(copy_of(graphed->forward(prompt, a)), copy_of(plain->forward(prompt, b)));
  for (std::int32_t token : some_tokens(10, spec.vocab, 8)) {
    const std::vector<std::int32_t> one = {token};
    EXPECT_EQ(copy_of(graphed->forward(one, a)), copy_of(plain->forward(one, b))) << "length " << a.length();
  }
  EXPECT_GE(graphed->cuda_graph_replays(), 8);
  EXPECT_EQ(plain->cuda_graph_replays(), 0);

  Generator gen_graphed(*graphed, 48), gen_plain(*plain, 48);
  GenerateOptions sampled;
  sampled.max_new_tokens = 12;
  sampled.temperature = 0.9;
  sampled.top_k = 20;
  sampled.seed = 11;
  const auto first = gen_graphed.generate(prompt, sampled);
  EXPECT_EQ(first.tokens, gen_plain.generate(prompt, sampled).tokens);
  std::vector<std::int32_t> turn2 = prompt;
  turn2.insert(turn2.end(), first.tokens.begin(), first.tokens.begin() + 4);
  turn2.push_back(3);
  const auto second = gen_graphed.generate(turn2, sampled);
  EXPECT_EQ(second.stats.reused_tokens, static_cast<std::int64_t>(turn2.size()) - 1);
  EXPECT_EQ(second.tokens, gen_plain.generate(turn2, sampled).tokens);

  // The GPU's greedy ids are the CPU engine's on this model.
  auto cpu = load_model(gguf.file, Device::cpu(), WeightFormat::f32);
  Generator gen_cpu(*cpu, 48);
  GenerateOptions greedy;
  greedy.max_new_tokens = 16;
  Generator gen_fresh(*graphed, 48);
  EXPECT_EQ(gen_fresh.generate(prompt, greedy).tokens, gen_cpu.generate(prompt, greedy).tokens);
}

TEST(CudaEngine, RejectsQ8AndForeignCaches) {
  IGNIS_SKIP_WITHOUT_GPU();
  const TinyLlama m = test::make_tiny_llama({});
  const test::ParsedGguf gguf(test::tiny_llama_gguf(m));
  EXPECT_ERROR_CONTAINS(load_model(gguf.file, Device::cuda(0), WeightFormat::q8),
                        "LlamaModel: weights.format: expected f32 or bf16 on cuda:0, got q8");
  auto gpu = load_model(gguf.file, Device::cuda(0), WeightFormat::f32);
  KvCache host_cache(m.spec.layers, 16, m.spec.kv_heads, m.spec.head_dim);
  const std::vector<std::int32_t> one = {1};
  EXPECT_ERROR_CONTAINS(gpu->forward(one, host_cache),
                        "LlamaModel::forward: cache: expected a cache made by this model's make_cache");
  KvCache cache = gpu->make_cache(2);
  const std::vector<std::int32_t> three = {1, 2, 3};
  EXPECT_ERROR_CONTAINS(gpu->forward(three, cache), "context length exceeded: 0 + 3 > 2");
  EXPECT_EQ(cache.length(), 0);
}

class CudaSmolLM2 : public testing::Test {
 protected:
  void SetUp() override {
    if (!cuda_available()) GTEST_SKIP() << "no CUDA GPU";
    path_ = test::find_smollm2();
    if (path_.empty()) GTEST_SKIP() << "SmolLM2 GGUF not found (scripts/setup.sh fetches it)";
    golden_ = test::load_hf_golden();
  }
  std::string path_;
  test::HfGoldenData golden_;
};

TEST_F(CudaSmolLM2, F32MatchesTransformers) {
  ASSERT_EQ(golden_.greedy_float32, golden_.greedy_float64) << "the golden run itself is ambiguous";
  const model::GgufFile file = model::GgufFile::open(path_);
  auto model = load_model(file, Device::cuda(0), WeightFormat::f32);
  KvCache cache = model->make_cache(128);
  const auto logits = copy_of(model->forward(golden_.prompt_ids, cache));
  ASSERT_EQ(logits.size(), golden_.last_logits.size());
  const double err = relative_error(logits, golden_.last_logits);
  std::printf("cuda f32: max |logit - transformers| relative to max |logit|: %.3g\n", err);
  EXPECT_LT(err, 1e-3);

  Generator generator(*model, 256);
  GenerateOptions greedy;
  greedy.max_new_tokens = static_cast<std::int64_t>(golden_.greedy_float32.size());
  EXPECT_EQ(generator.generate(golden_.prompt_ids, greedy).tokens, golden_.greedy_float32);
  EXPECT_GT(model->cuda_graph_replays(), 0);
}

// bf16 products drift from the f32 golden; this bounds the drift and reports the greedy agreement.
TEST_F(CudaSmolLM2, Bf16StaysCloseToTransformers) {
  const model::GgufFile file = model::GgufFile::open(path_);
  auto model = load_model(file, Device::cuda(0), WeightFormat::bf16);
  KvCache cache = model->make_cache(128);
  const auto logits = copy_of(model->forward(golden_.prompt_ids, cache));
  const double err = relative_error(logits, golden_.last_logits);
  Generator generator(*model, 256);
  GenerateOptions greedy;
  greedy.max_new_tokens = static_cast<std::int64_t>(golden_.greedy_float32.size());
  const auto tokens = generator.generate(golden_.prompt_ids, greedy).tokens;
  std::size_t same = 0;
  while (same < tokens.size() && same < golden_.greedy_float32.size() && tokens[same] == golden_.greedy_float32[same])
    ++same;
  std::printf("cuda bf16: logits relative error %.3g; first %zu of %zu greedy tokens as transformers\n", err, same,
              golden_.greedy_float32.size());
  EXPECT_LT(err, 5e-2);
  EXPECT_EQ(tokens.front(), golden_.greedy_float32.front());
}

// The lead's benchmark shape: a 1024-token prompt, 128 greedy tokens. Prints, asserts nothing on speed.
TEST_F(CudaSmolLM2, TimingOf1024PromptAnd128Tokens) {
  const model::GgufFile file = model::GgufFile::open(path_);
  for (WeightFormat format : {WeightFormat::bf16, WeightFormat::f32}) {
    auto model = load_model(file, Device::cuda(0), format);
    std::vector<std::int32_t> ids(1024);
    for (std::size_t i = 0; i < ids.size(); ++i)
      ids[i] = static_cast<std::int32_t>((i * 7919 + 13) % static_cast<std::size_t>(model->config().vocab_size));
    GenerateOptions options;
    options.max_new_tokens = 128;
    Generator warmup(*model, 1024 + 128);
    warmup.generate(std::span(ids).first(16), options);  // cuBLASLt plans, module loading
    Generator generator(*model, 1024 + 128);
    const GenerationResult r = generator.generate(ids, options);
    const GenerationStats& s = r.stats;
    std::printf("cuda %s: prefill 1024 tokens %.2f ms, TTFT %.2f ms, TBT median %.3f ms mean %.3f ms (%lld tokens, "
                "%lld graph replays)\n",
                weight_format_name(format).c_str(), s.prefill_s * 1e3, s.ttft_s * 1e3, s.tbt_median_s * 1e3,
                s.tbt_mean_s * 1e3, static_cast<long long>(s.generated_tokens),
                static_cast<long long>(model->cuda_graph_replays()));
    EXPECT_EQ(s.generated_tokens, 128);
  }
}

}  // namespace
}  // namespace ignis::engine
