// The CUDA GPT-2 engine: the tiny random GPT-2 on CUDA against the CPU engine (prefill and every
// decode step, with and without graphs), graph replay against plain launches, the bf16 mode, GPU
// sampling against the host argmax, the context limit of the learned positions, and the committed
// transformers golden (tests/engine/data/gpt2_tiny) matched on the GPU. Skipped without a GPU.
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>

#include "engine/generator.h"
#include "engine/gpt2_model.h"
#include "engine/logits_check.h"
#include "engine/tiny_gpt2.h"
#include "ignis/device.h"
#include "model/error_text.h"
#include "model/model_paths.h"

namespace ignis::engine {
namespace {

using test::row_error;
using test::some_tokens;
using test::TinyGpt2;
using test::TinyGpt2Spec;

#define IGNIS_SKIP_WITHOUT_GPU()                          \
  do {                                                    \
    if (!cuda_available()) GTEST_SKIP() << "no CUDA GPU"; \
  } while (0)

struct Folder {
  explicit Folder(const TinyGpt2& m) { test::write_tiny_gpt2(dir, m); }
  test::TempDir dir;
};

std::unique_ptr<Gpt2Model> load_model(const std::string& path, Device device, WeightFormat format,
                                      bool graphs = true) {
  ModelOptions options;
  options.device = device;
  options.threads = 1;
  options.weights.format = format;
  options.cuda_graphs = graphs;
  return Gpt2Model::load(path, options);
}

std::vector<float> copy_of(std::span<const float> s) { return {s.begin(), s.end()}; }

std::int32_t argmax(std::span<const float> row) {
  return static_cast<std::int32_t>(std::max_element(row.begin(), row.end()) - row.begin());
}

// Prefill (every position's logits) then 8 decode steps of fixed tokens, on the CPU and on CUDA;
// every logits row must agree within `tol`.
void expect_cuda_matches_cpu(const TinyGpt2& m, WeightFormat format, double tol, bool graphs) {
  SCOPED_TRACE(testing::Message() << weight_format_name(format) << (graphs ? " with graphs" : " without graphs"));
  const Folder f(m);
  auto cpu = load_model(f.dir.path().string(), Device::cpu(), format);
  auto gpu = load_model(f.dir.path().string(), Device::cuda(0), format, graphs);
  KvCache cpu_cache = cpu->make_cache(), gpu_cache = gpu->make_cache();
  EXPECT_EQ(gpu_cache.device(), Device::cuda(0));
  const std::size_t vocab = static_cast<std::size_t>(m.spec.vocab);
  const auto prompt = some_tokens(9, m.spec.vocab, 5);
  const auto want = copy_of(cpu->forward(prompt, cpu_cache, true));
  const auto got = copy_of(gpu->forward(prompt, gpu_cache, true));
  ASSERT_EQ(got.size(), want.size());
  for (std::size_t t = 0; t < prompt.size(); ++t)
    EXPECT_LT(row_error(std::span(got).subspan(t * vocab, vocab), std::span(want).subspan(t * vocab, vocab)), tol)
        << "prefill position " << t;
  for (std::int32_t token : some_tokens(8, m.spec.vocab, 6)) {
    const std::vector<std::int32_t> one = {token};
    const auto want_step = copy_of(cpu->forward(one, cpu_cache));
    const auto got_step = copy_of(gpu->forward(one, gpu_cache));
    EXPECT_LT(row_error(got_step, want_step), tol) << "decode at length " << cpu_cache.length();
  }
  EXPECT_EQ(gpu_cache.length(), cpu_cache.length());
  if (graphs) {
    EXPECT_GT(gpu->cuda_graph_replays(), 0) << "decode steps never replayed a captured graph";
  } else {
    EXPECT_EQ(gpu->cuda_graph_replays(), 0);
  }
}

TEST(CudaGpt2, TinyF32MatchesTheCpuEngine) {
  IGNIS_SKIP_WITHOUT_GPU();
  const TinyGpt2 m = test::make_tiny_gpt2({});
  expect_cuda_matches_cpu(m, WeightFormat::f32, 1e-4, true);
  expect_cuda_matches_cpu(m, WeightFormat::f32, 1e-4, false);
}

// The GPT2LMHeadModel layout with a head of its own, wider heads and an odd ffn width (rows of
// 37 floats: no 16-byte alignment for cuBLASLt's vector loads).
TEST(CudaGpt2, TinyUntiedOddWidthsMatchTheCpuEngine) {
  IGNIS_SKIP_WITHOUT_GPU();
  TinyGpt2Spec untied;
  untied.prefix = "transformer.";
  untied.lm_head = true;
  untied.dim = 24;
  untied.heads = 3;
  untied.ffn = 37;
  untied.seed = 2;
  expect_cuda_matches_cpu(test::make_tiny_gpt2(untied), WeightFormat::f32, 1e-4, true);
}

// bf16 weights on both; on CUDA the linear layers' inputs are rounded to bf16 too (8 bits of
// mantissa, ~0.4% per rounding), the CPU keeps them f32.
TEST(CudaGpt2, TinyBf16IsCloseToTheCpuEngine) {
  IGNIS_SKIP_WITHOUT_GPU();
  expect_cuda_matches_cpu(test::make_tiny_gpt2({}), WeightFormat::bf16, 5e-2, true);
}

// Same kernels in the same order: replayed steps give the same bits as plain launches, across a
// second turn that truncates the cache to the common prefix (the device lengths, which place
// the learned positions, are rewritten).
TEST(CudaGpt2, GraphReplayEqualsPlainLaunches) {
  IGNIS_SKIP_WITHOUT_GPU();
  TinyGpt2Spec spec;
  spec.positions = 48;
  spec.seed = 3;
  const TinyGpt2 m = test::make_tiny_gpt2(spec);
  const Folder f(m);
  auto graphed = load_model(f.dir.path().string(), Device::cuda(0), WeightFormat::f32, true);
  auto plain = load_model(f.dir.path().string(), Device::cuda(0), WeightFormat::f32, false);

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

  // The GPU's greedy ids are the CPU engine's on this model, from a fresh generator and after
  // the second turn's truncation.
  auto cpu = load_model(f.dir.path().string(), Device::cpu(), WeightFormat::f32);
  Generator gen_cpu(*cpu, 48);
  GenerateOptions greedy;
  greedy.max_new_tokens = 16;
  Generator gen_fresh(*graphed, 48);
  EXPECT_EQ(gen_fresh.generate(prompt, greedy).tokens, gen_cpu.generate(prompt, greedy).tokens);
  EXPECT_EQ(gen_graphed.generate(turn2, greedy).tokens, gen_cpu.generate(turn2, greedy).tokens);
}

// forward_sample keeps the logits on the GPU and returns only the id: greedily, the same ids as
// the host's argmax of forward's logits, step after step (each sampled id feeds the next step
// straight from device memory).
TEST(CudaGpt2, GpuSamplingGivesTheHostArgmax) {
  IGNIS_SKIP_WITHOUT_GPU();
  const TinyGpt2 m = test::make_tiny_gpt2({});
  const Folder f(m);
  for (bool graphs : {true, false}) {
    SCOPED_TRACE(graphs ? "with graphs" : "without graphs");
    auto sampled = load_model(f.dir.path().string(), Device::cuda(0), WeightFormat::f32, graphs);
    auto host = load_model(f.dir.path().string(), Device::cuda(0), WeightFormat::f32, graphs);
    KvCache a = sampled->make_cache(), b = host->make_cache();
    SamplingParams greedy;
    greedy.temperature = 0.0;
    std::vector<std::int32_t> next = some_tokens(4, m.spec.vocab, 9), want_next = next;
    for (int step = 0; step < 12; ++step) {
      greedy.step = static_cast<std::uint64_t>(step);
      const std::int32_t id = sampled->forward_sample(next, a, greedy);
      const std::int32_t want = argmax(host->forward(want_next, b));
      ASSERT_EQ(id, want) << "step " << step;
      next = want_next = {id};
    }
    EXPECT_EQ(a.length(), b.length());
    if (graphs) {
      EXPECT_GT(sampled->cuda_graph_replays(), 0);
    }
  }
}

TEST(CudaGpt2, ContextLimitAndForeignCaches) {
  IGNIS_SKIP_WITHOUT_GPU();
  const TinyGpt2 m = test::make_tiny_gpt2({});  // 24 learned positions
  const Folder f(m);
  EXPECT_ERROR_CONTAINS(load_model(f.dir.path().string(), Device::cuda(0), WeightFormat::q8),
                        "weights.format: expected f32 or bf16 on cuda:0, got q8");
  auto gpu = load_model(f.dir.path().string(), Device::cuda(0), WeightFormat::f32);
  EXPECT_ERROR_CONTAINS(gpu->make_cache(m.spec.positions + 1), "Gpt2Model::make_cache: max_seq");

  KvCache host_cache(m.spec.layers, 16, m.spec.heads, m.spec.dim / m.spec.heads);
  const std::vector<std::int32_t> one = {1};
  EXPECT_ERROR_CONTAINS(gpu->forward(one, host_cache), "cache: expected a cache made by this model's make_cache");

  KvCache cache = gpu->make_cache();
  const auto prompt = some_tokens(m.spec.positions - 1, m.spec.vocab, 10);
  gpu->forward(prompt, cache);
  const std::vector<std::int32_t> two = {1, 2};
  EXPECT_ERROR_CONTAINS(gpu->forward(two, cache), "context length exceeded: 23 + 2 > 24 (GPT-2's learned positions)");
  EXPECT_EQ(cache.length(), m.spec.positions - 1);
  // The last position still runs (wpe's last row), then the context is full.
  const auto last = copy_of(gpu->forward(one, cache));
  EXPECT_EQ(cache.length(), m.spec.positions);
  EXPECT_TRUE(std::all_of(last.begin(), last.end(), [](float v) { return std::isfinite(v); }));
  EXPECT_ERROR_CONTAINS(gpu->forward(one, cache), "context length exceeded: 24 + 1 > 24");
  SamplingParams params;
  EXPECT_ERROR_CONTAINS(gpu->forward_sample(one, cache, params), "context length exceeded");
  EXPECT_EQ(cache.length(), m.spec.positions);

  // The same last step on the CPU engine: the full-context logits agree.
  auto cpu = load_model(f.dir.path().string(), Device::cpu(), WeightFormat::f32);
  KvCache cpu_cache = cpu->make_cache();
  cpu->forward(prompt, cpu_cache);
  EXPECT_LT(row_error(last, copy_of(cpu->forward(one, cpu_cache))), 1e-4);

  // Generation stops at the context limit instead of failing.
  Generator generator(*gpu);
  GenerateOptions greedy;
  greedy.max_new_tokens = 100;
  const GenerationResult r = generator.generate(some_tokens(20, m.spec.vocab, 11), greedy);
  EXPECT_EQ(r.reason, StopReason::context_full);
  EXPECT_EQ(generator.cache().length(), m.spec.positions);
}

// ---- the transformers golden (see test_gpt2_golden.cpp) --------------------------------------

struct Golden {
  std::vector<std::int32_t> prompt_ids, greedy_float64, greedy_float32;
  std::int64_t vocab = 0, rows = 0;
  std::vector<float> logits;  // [rows, vocab]: every position of prompt_ids + greedy_float64[:-1]
};

std::filesystem::path golden_dir() { return test::source_root() / "tests/engine/data/gpt2_tiny"; }

class CudaGpt2Golden : public testing::Test {
 protected:
  void SetUp() override {
    if (!cuda_available()) GTEST_SKIP() << "no CUDA GPU";
    if (!std::filesystem::exists(golden_dir() / "golden.json"))
      FAIL() << golden_dir().string() << " not found (committed; scripts/hf_gpt2_golden.py writes it)";
    std::ifstream json_file(golden_dir() / "golden.json");
    const nlohmann::json j = nlohmann::json::parse(json_file);
    g_.prompt_ids = j.at("prompt_ids").get<std::vector<std::int32_t>>();
    g_.greedy_float64 = j.at("greedy_float64").get<std::vector<std::int32_t>>();
    g_.greedy_float32 = j.at("greedy_float32").get<std::vector<std::int32_t>>();
    g_.vocab = j.at("vocab_size").get<std::int64_t>();
    g_.rows = j.at("logits_rows").get<std::int64_t>();
    std::ifstream logits_file(golden_dir() / "logits.f32", std::ios::binary);
    g_.logits.resize(static_cast<std::size_t>(g_.rows * g_.vocab));
    logits_file.read(reinterpret_cast<char*>(g_.logits.data()),
                     static_cast<std::streamsize>(g_.logits.size() * sizeof(float)));
    ASSERT_TRUE(logits_file) << "logits.f32 is shorter than golden.json says";
  }

  std::span<const float> golden_row(std::int64_t r) const {
    return std::span<const float>(g_.logits).subspan(static_cast<std::size_t>(r * g_.vocab),
                                                      static_cast<std::size_t>(g_.vocab));
  }

  // Every position's logits in one prefill; returns the largest row error.
  double prefill_error(Gpt2Model& model) const {
    std::vector<std::int32_t> fed = g_.prompt_ids;
    fed.insert(fed.end(), g_.greedy_float64.begin(), g_.greedy_float64.end() - 1);
    EXPECT_EQ(static_cast<std::int64_t>(fed.size()), g_.rows);
    KvCache cache = model.make_cache();
    const auto logits = copy_of(model.forward(fed, cache, /*all_logits=*/true));
    EXPECT_EQ(logits.size(), g_.logits.size());
    double worst = 0.0;
    for (std::int64_t r = 0; r < g_.rows && logits.size() == g_.logits.size(); ++r)
      worst = std::max(worst, row_error(std::span<const float>(logits).subspan(static_cast<std::size_t>(r * g_.vocab),
                                                                               static_cast<std::size_t>(g_.vocab)),
                                        golden_row(r)));
    return worst;
  }

  std::vector<std::int32_t> greedy(Gpt2Model& model) const {
    Generator generator(model);
    GenerateOptions options;
    options.max_new_tokens = static_cast<std::int64_t>(g_.greedy_float64.size());  // no stop ids: all 32
    return generator.generate(g_.prompt_ids, options).tokens;
  }

  Golden g_;
};

TEST_F(CudaGpt2Golden, F32MatchesTransformers) {
  ASSERT_EQ(g_.greedy_float32, g_.greedy_float64) << "the golden run itself is ambiguous";
  auto model = load_model(golden_dir().string(), Device::cuda(0), WeightFormat::f32);
  const double err = prefill_error(*model);
  std::printf("cuda f32: largest |logit - transformers| / max |logit| over %lld positions: %.3g\n",
              static_cast<long long>(g_.rows), err);
  EXPECT_LT(err, 1e-3);
  EXPECT_EQ(greedy(*model), g_.greedy_float64);
  EXPECT_GT(model->cuda_graph_replays(), 0);

  auto plain = load_model(golden_dir().string(), Device::cuda(0), WeightFormat::f32, /*graphs=*/false);
  EXPECT_EQ(greedy(*plain), g_.greedy_float64);
}

// bf16 products drift from the f32 golden; this bounds the drift and reports the greedy agreement.
// The first greedy token must match wherever the golden's top-two margin exceeds twice the drift.
TEST_F(CudaGpt2Golden, Bf16StaysCloseToTransformers) {
  auto model = load_model(golden_dir().string(), Device::cuda(0), WeightFormat::bf16);
  const double err = prefill_error(*model);
  const auto tokens = greedy(*model);
  std::size_t same = 0;
  while (same < tokens.size() && same < g_.greedy_float64.size() && tokens[same] == g_.greedy_float64[same]) ++same;
  std::printf("cuda bf16: logits relative error %.3g; first %zu of %zu greedy tokens as transformers\n", err, same,
              g_.greedy_float64.size());
  EXPECT_LT(err, 5e-2);

  const std::span<const float> row = golden_row(static_cast<std::int64_t>(g_.prompt_ids.size()) - 1);
  std::vector<float> sorted(row.begin(), row.end());
  std::partial_sort(sorted.begin(), sorted.begin() + 2, sorted.end(), std::greater<float>());
  double scale = 1.0;
  for (float v : row) scale = std::max(scale, std::abs(static_cast<double>(v)));
  ASSERT_FALSE(tokens.empty());
  if (sorted[0] - sorted[1] > 2.0 * err * scale) {
    EXPECT_EQ(tokens.front(), g_.greedy_float64.front());
  }
}

}  // namespace
}  // namespace ignis::engine
