// The engine's GPT-2 against the independent fp64 model of tiny_gpt2.h, loaded from a model
// folder written the way transformers writes one; incremental decode, the learned-position
// limit, the generator, and malformed folders.
#include <gtest/gtest.h>

#include <algorithm>

#include "engine/generator.h"
#include "engine/gpt2_model.h"
#include "engine/logits_check.h"
#include "engine/tiny_gpt2.h"
#include "model/error_text.h"
#include "model/tokenizer.h"

namespace ignis::engine {
namespace {

using test::kF32Tol;
using test::row_error;
using test::some_tokens;
using test::TinyGpt2;
using test::TinyGpt2Spec;

struct Folder {
  explicit Folder(const TinyGpt2& m) { test::write_tiny_gpt2(dir, m); }
  test::TempDir dir;
};

std::unique_ptr<Gpt2Model> load(const std::string& path, WeightFormat format = WeightFormat::f32, int threads = 2) {
  ModelOptions options;
  options.threads = threads;
  options.weights.format = format;
  return Gpt2Model::load(path, options);
}

void expect_all_logits_match(Gpt2Model& model, const TinyGpt2& ref_model, const std::vector<std::int32_t>& tokens) {
  test::expect_all_logits_match(model, tokens, test::ref_gpt2_forward(ref_model, tokens), kF32Tol);
}

TEST(Gpt2Model, LogitsMatchFp64Reference) {
  const TinyGpt2 m = test::make_tiny_gpt2({});
  Folder f(m);
  auto model = load(f.dir.path().string());
  EXPECT_EQ(model->vocab_size(), m.spec.vocab);
  EXPECT_EQ(model->context_length(), m.spec.positions);
  expect_all_logits_match(*model, m, some_tokens(11, m.spec.vocab, 31));
}

// GPT2LMHeadModel checkpoints prefix "transformer."; some keep an lm_head.weight of their own;
// n_inner defaults to 4 * n_embd. The .safetensors path works as well as the folder.
TEST(Gpt2Model, PrefixedUntiedAndDefaultInnerWidth) {
  TinyGpt2Spec s;
  s.prefix = "transformer.";
  s.lm_head = true;
  s.ffn = 4 * s.dim;
  s.layers = 3;
  s.seed = 7;
  const TinyGpt2 m = test::make_tiny_gpt2(s);
  test::TempDir dir;
  test::write_tiny_gpt2(dir, m);
  nlohmann::json config = test::tiny_gpt2_config(s);
  config.erase("n_inner");
  dir.write("config.json", config.dump());
  auto model = load(dir.file("model.safetensors"));
  EXPECT_TRUE(model->weights().lm_head_weight.has_value());
  expect_all_logits_match(*model, m, some_tokens(9, s.vocab, 32));
}

TEST(Gpt2Model, LastLogitsOnlyAndOneThread) {
  const TinyGpt2 m = test::make_tiny_gpt2({.seed = 3});
  Folder f(m);
  auto model = load(f.dir.path().string(), WeightFormat::f32, /*threads=*/1);
  const auto tokens = some_tokens(6, m.spec.vocab, 33);
  KvCache cache = model->make_cache();
  const auto logits = model->forward(tokens, cache);
  ASSERT_EQ(logits.size(), static_cast<std::size_t>(m.spec.vocab));
  EXPECT_LT(row_error(logits, test::ref_gpt2_forward(m, tokens).back()), kF32Tol);
}

// Feeding tokens one at a time (and in uneven chunks) through the cache gives the logits of the
// full recomputation at every position, up to the last position the model has.
TEST(Gpt2Model, IncrementalDecodeEqualsFullRecompute) {
  const TinyGpt2 m = test::make_tiny_gpt2({});
  Folder f(m);
  auto model = load(f.dir.path().string());
  const auto tokens = some_tokens(m.spec.positions, m.spec.vocab, 34);
  const auto want = test::ref_gpt2_forward(m, tokens);
  KvCache full_cache = model->make_cache();
  const auto all = model->forward(tokens, full_cache, true);
  const std::vector<float> full(all.begin(), all.end());
  const std::size_t vocab = static_cast<std::size_t>(m.spec.vocab);

  KvCache cache = model->make_cache();
  const std::vector<std::size_t> chunks = {3, 1, 1, 5, 1, 2, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1};
  std::size_t at = 0;
  for (std::size_t chunk : chunks) {
    const auto logits = model->forward(std::span<const std::int32_t>(tokens.data() + at, chunk), cache);
    at += chunk;
    EXPECT_LT(row_error(logits, want[at - 1]), kF32Tol) << "after " << at << " tokens";
    const std::vector<double> full_row(full.begin() + static_cast<std::ptrdiff_t>((at - 1) * vocab),
                                       full.begin() + static_cast<std::ptrdiff_t>(at * vocab));
    EXPECT_LT(row_error(logits, full_row), 1e-5) << "after " << at << " tokens";
  }
  ASSERT_EQ(at, tokens.size());
  EXPECT_EQ(cache.length(), m.spec.positions);
}

TEST(Gpt2Model, StoredWeightFormats) {
  const TinyGpt2 m = test::make_tiny_gpt2({.seed = 4});
  Folder f(m);
  const auto tokens = some_tokens(7, m.spec.vocab, 35);
  const auto want = test::ref_gpt2_forward(m, tokens).back();
  for (const auto& [format, tol] : {std::pair{WeightFormat::bf16, 2e-2}, std::pair{WeightFormat::q8, 3e-2}}) {
    auto model = load(f.dir.path().string(), format);
    KvCache cache = model->make_cache();
    const double err = row_error(model->forward(tokens, cache), want);
    EXPECT_LT(err, tol) << weight_format_name(format);
    EXPECT_GT(err, kF32Tol) << weight_format_name(format) << ": the weights were not rounded";
  }
}

// Positions are learned: there is no position n_positions, whatever the cache can hold.
TEST(Gpt2Model, ContextLengthIsTheNumberOfPositions) {
  const TinyGpt2 m = test::make_tiny_gpt2({});
  Folder f(m);
  auto model = load(f.dir.path().string());
  const std::int64_t P = m.spec.positions;
  EXPECT_ERROR_CONTAINS(model->make_cache(P + 1), "Gpt2Model::make_cache: max_seq: expected <= n_positions 24");
  EXPECT_EQ(model->make_cache().max_seq(), P);
  EXPECT_EQ(model->make_cache(5).max_seq(), 5);

  // A cache made by hand with more room than positions.
  KvCache big(m.spec.layers, P + 8, m.spec.heads, m.spec.dim / m.spec.heads);
  const auto tokens = some_tokens(P - 2, m.spec.vocab, 36);
  model->forward(tokens, big);
  const std::vector<std::int32_t> three = {1, 2, 3};
  EXPECT_ERROR_CONTAINS(model->forward(three, big),
                        "context length exceeded: 22 + 3 > 24 (GPT-2's learned positions)");
  EXPECT_EQ(big.length(), P - 2);  // unchanged
  const std::vector<std::int32_t> two = {4, 5};
  model->forward(two, big);
  EXPECT_EQ(big.length(), P);
  EXPECT_ERROR_CONTAINS(model->forward(std::vector<std::int32_t>{6}, big), "context length exceeded: 24 + 1 > 24");

  // A generator stops at the last position.
  Generator gen(*model);
  GenerateOptions o;
  o.max_new_tokens = 100;
  const GenerationResult r = gen.generate(some_tokens(P - 4, m.spec.vocab, 37), o);
  EXPECT_EQ(r.reason, StopReason::context_full);
  EXPECT_EQ(r.tokens.size(), 5u);  // 4 fed back, the 5th sampled from the last position
  EXPECT_ERROR_CONTAINS(gen.generate(some_tokens(P + 1, m.spec.vocab, 38), o), "context length exceeded: 25 > 24");
}

TEST(Gpt2Model, GeneratorGreedyFollowsTheReferenceArgmax) {
  const TinyGpt2 m = test::make_tiny_gpt2({.seed = 9});
  Folder f(m);
  auto model = load(f.dir.path().string());
  Generator gen(*model);
  GenerateOptions o;
  o.max_new_tokens = 10;
  std::vector<std::int32_t> context = {test::kHello, 32, test::kSpaceW, 111, 114};
  const GenerationResult r = gen.generate(context, o);
  ASSERT_EQ(r.tokens.size(), 10u);
  for (std::int32_t got : r.tokens) {
    const auto row = test::ref_gpt2_forward(m, context).back();
    const auto want = static_cast<std::int32_t>(std::max_element(row.begin(), row.end()) - row.begin());
    EXPECT_EQ(got, want) << "after " << context.size() << " tokens";
    context.push_back(want);
  }
}

// GPT-2 keeps CausalLm's forward_sample: forward, then ignis::sample on the host.
TEST(Gpt2Model, ForwardSampleIsForwardThenSample) {
  const TinyGpt2 m = test::make_tiny_gpt2({.seed = 11});
  Folder f(m);
  auto model = load(f.dir.path().string());
  const std::vector<std::int32_t> context = some_tokens(6, m.spec.vocab, 41);
  SamplingParams params;
  params.temperature = 1.3;
  params.top_k = 20;
  params.seed = 5;
  for (std::uint64_t step = 0; step < 4; ++step) {
    params.step = step;
    KvCache a = model->make_cache(), b = model->make_cache();
    const std::int32_t got = model->forward_sample(context, a, params);
    const std::span<const float> logits = model->forward(context, b);
    std::int32_t want = -1;
    sample(Tensor::view(const_cast<float*>(logits.data()), DType::f32, Device::cpu(), {1, m.spec.vocab}), params,
           Tensor::view(&want, DType::i32, Device::cpu(), {1}));
    EXPECT_EQ(got, want) << "step " << step;
    EXPECT_EQ(a.length(), b.length());
  }
}

TEST(Gpt2Model, BadCallsThrow) {
  const TinyGpt2 m = test::make_tiny_gpt2({});
  Folder f(m);
  auto model = load(f.dir.path().string());
  KvCache cache = model->make_cache();
  EXPECT_ERROR_CONTAINS(model->forward(std::vector<std::int32_t>{}, cache), "tokens: expected at least one token");
  EXPECT_ERROR_CONTAINS(model->forward(std::vector<std::int32_t>{1, static_cast<std::int32_t>(m.spec.vocab)}, cache),
                        "Gpt2Model::forward: tokens[1]: expected an id in [0, 269), got 269");
  EXPECT_ERROR_CONTAINS(model->forward(std::vector<std::int32_t>{-1}, cache), "tokens[0]");
  KvCache other(m.spec.layers, 8, 2, 8);
  EXPECT_ERROR_CONTAINS(model->forward(std::vector<std::int32_t>{1}, other), "cache: expected a cache made by");
  EXPECT_EQ(cache.length(), 0);
  // cuBLASLt has no q8 product: rejected before the weights are read (so without a GPU too).
  ModelOptions cuda;
  cuda.device = Device::cuda(0);
  cuda.weights.format = WeightFormat::q8;
  EXPECT_ERROR_CONTAINS(Gpt2Model::load(f.dir.path().string(), cuda),
                        "Gpt2Model: weights.format: expected f32 or bf16 on cuda:0, got q8");
}

// The folder a CLI user points at: its files, and the tokenizer beside the weights.
TEST(Gpt2Model, FolderFilesAndTokenizer) {
  const TinyGpt2 m = test::make_tiny_gpt2({});
  Folder f(m);
  const Gpt2Files from_dir = Gpt2Files::locate(f.dir.path().string());
  EXPECT_EQ(from_dir.config, f.dir.file("config.json"));
  EXPECT_EQ(from_dir.weights, f.dir.file("model.safetensors"));
  EXPECT_EQ(from_dir.tokenizer, f.dir.file("tokenizer.json"));
  const Gpt2Files from_file = Gpt2Files::locate(f.dir.file("model.safetensors"));
  EXPECT_EQ(from_file.config, from_dir.config);
  EXPECT_EQ(from_file.tokenizer, from_dir.tokenizer);
  EXPECT_ERROR_CONTAINS(Gpt2Files::locate(f.dir.file("model.gguf")),
                        "gpt2: model path: expected a folder with config.json and model.safetensors");

  const model::Tokenizer tok = model::Tokenizer::from_hf_json(from_dir.tokenizer);
  EXPECT_EQ(tok.vocab_size(), m.spec.vocab);
  EXPECT_EQ(tok.encode("hello world"), (std::vector<std::int32_t>{test::kHello, test::kSpaceW, 'o', 'r', 'l', 'd'}));
  EXPECT_EQ(tok.stop_ids(), (std::vector<std::int32_t>{test::kImEnd, test::kEndOfText}));
}

// Every tensor is required and checked for its shape; the errors name it.
TEST(Gpt2Model, MalformedWeightsNameTheTensor) {
  const TinyGpt2 m = test::make_tiny_gpt2({});
  test::TempDir dir;
  test::write_tiny_gpt2(dir, m);
  const std::string path = dir.path().string();
  for (const std::string name : {"wte.weight", "wpe.weight", "ln_f.bias", "h.0.ln_1.weight", "h.1.attn.c_attn.bias",
                                 "h.1.attn.c_proj.weight", "h.0.mlp.c_fc.weight", "h.1.mlp.c_proj.bias",
                                 "h.1.ln_2.bias"}) {
    dir.write("model.safetensors", test::tiny_gpt2_writer(m, name).build());
    EXPECT_ERROR_CONTAINS(load(path), "gpt2 weights: " + name + ": expected a tensor of shape");
  }

  const auto f32 = [](std::size_t n) { return test::f32_bytes(std::vector<double>(n, 0.5)); };
  const auto with_replaced = [&](const std::string& name, std::vector<std::uint64_t> shape, const std::string& dtype,
                                 test::Bytes data) {
    test::SafetensorsWriter w = test::tiny_gpt2_writer(m, name);
    w.add(name, dtype, std::move(shape), std::move(data));
    dir.write("model.safetensors", w.build());
  };
  // A PyTorch Linear's [out, in] instead of Conv1D's [in, out].
  with_replaced("h.0.attn.c_attn.weight", {48, 16}, "F32", f32(48 * 16));
  EXPECT_ERROR_CONTAINS(load(path), "gpt2 weights: h.0.attn.c_attn.weight.shape: expected [16, 48], got [48, 16]");
  with_replaced("h.1.mlp.c_fc.weight", {40, 16}, "F32", f32(40 * 16));
  EXPECT_ERROR_CONTAINS(load(path), "h.1.mlp.c_fc.weight.shape: expected [16, 40], got [40, 16]");
  // Fewer positions than config.json promises.
  with_replaced("wpe.weight", {20, 16}, "F32", f32(20 * 16));
  EXPECT_ERROR_CONTAINS(load(path), "wpe.weight.shape: expected [24, 16], got [20, 16]");
  with_replaced("wte.weight", {300, 16}, "F32", f32(300 * 16));
  EXPECT_ERROR_CONTAINS(load(path), "wte.weight.shape: expected [269, 16], got [300, 16]");
  with_replaced("ln_f.weight", {16}, "F8_E4M3", test::Bytes(16, std::byte{0}));
  EXPECT_ERROR_CONTAINS(load(path), "'ln_f.weight' has dtype F8_E4M3");
  // Half-precision checkpoints load (widened to f32).
  with_replaced("ln_f.weight", {16}, "BF16", test::Bytes(32, std::byte{0}));
  EXPECT_NO_THROW(load(path));

  dir.write("model.safetensors", test::tiny_gpt2_writer(m).build());
  nlohmann::json config = test::tiny_gpt2_config(m.spec);
  config["n_layer"] = 3;
  dir.write("config.json", config.dump());
  EXPECT_ERROR_CONTAINS(load(path), "gpt2 weights: h.2.ln_1.weight: expected a tensor of shape [16], got none");
  std::filesystem::remove(dir.file("config.json"));
  EXPECT_ERROR_CONTAINS(load(path), "config.json: cannot open");
  test::write_tiny_gpt2(dir, m);
  std::filesystem::remove(dir.file("model.safetensors"));
  EXPECT_ERROR_CONTAINS(load(path), "model.safetensors");
}

}  // namespace
}  // namespace ignis::engine
