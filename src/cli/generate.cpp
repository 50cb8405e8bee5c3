#include "cli/generate.h"

#include <cstdio>
#include <filesystem>
#include <functional>
#include <iostream>
#include <memory>
#include <optional>
#include <sstream>
#include <vector>

#include "engine/generator.h"
#include "engine/gpt2_model.h"
#include "engine/linear.h"
#include "engine/llama_model.h"
#include "engine/run_summary.h"
#include "ignis/error.h"
#include "model/gguf.h"
#include "model/tokenizer.h"

namespace ignis::cli {
namespace {

// A GGUF file (Llama family) or a Hugging Face GPT-2 folder, and where its tokenizer lives.
struct Loaded {
  std::optional<model::GgufFile> gguf;
  std::string tokenizer_json;  // GPT-2: the tokenizer.json beside the weights
  std::unique_ptr<engine::CausalLm> model;
  engine::ModelOptions options;
  // What the bench line reports of a CUDA model: its attention backend and graph replays.
  std::function<const char*()> attention_name;
  std::function<std::int64_t()> graph_replays;

  model::Tokenizer tokenizer() const {
    return gguf ? model::Tokenizer::from_gguf(*gguf) : model::Tokenizer::from_hf_json(tokenizer_json);
  }
};

// A folder or a .safetensors file is a Hugging Face GPT-2; anything else is read as GGUF.
bool is_gpt2_path(const std::string& path) {
  return std::filesystem::is_directory(path) || std::filesystem::path(path).extension() == ".safetensors";
}

template <class Model>
std::unique_ptr<engine::CausalLm> with_cuda_report(Loaded& l, std::unique_ptr<Model> model) {
  const Model* m = model.get();
  l.attention_name = [m] { return m->attention().name(); };
  l.graph_replays = [m] { return m->cuda_graph_replays(); };
  return model;
}

Loaded load(const std::string& path, const std::string& device, const std::string& weights, int threads) {
  engine::ModelOptions options;
  options.device = Device::parse(device);
  options.threads = threads;
  options.weights.format = weights.empty()
                               ? (options.device.is_cuda() ? engine::WeightFormat::bf16 : engine::WeightFormat::q8)
                               : engine::parse_weight_format(weights);
  Loaded l;
  l.options = options;
  if (is_gpt2_path(path)) {
    l.tokenizer_json = engine::Gpt2Files::locate(path).tokenizer;
    l.model = with_cuda_report(l, engine::Gpt2Model::load(path, options));
  } else {
    l.gguf.emplace(model::GgufFile::open(path));
    l.model = with_cuda_report(l, engine::LlamaModel::load(*l.gguf, options));
  }
  return l;
}

std::vector<std::int32_t> parse_ids(const std::string& text) {
  std::vector<std::int32_t> ids;
  std::stringstream in(text);
  std::string item;
  while (std::getline(in, item, ',')) {
    std::size_t used = 0;
    long long v = 0;
    try {
      v = std::stoll(item, &used);
    } catch (const std::exception&) {
      used = 0;
    }
    check_arg(used > 0 && item.find_first_not_of(" ", used) == std::string::npos, "ignis", "--prompt-ids",
              "comma-separated integers", item);
    check_arg(v >= 0 && v < (1LL << 31), "ignis", "--prompt-ids", "ids in [0, 2^31)", v);
    ids.push_back(static_cast<std::int32_t>(v));
  }
  check_arg(!ids.empty(), "ignis", "--prompt-ids", "at least one id", "none");
  return ids;
}

engine::GenerateOptions options_of(const GenerateArgs& a) {
  engine::GenerateOptions o;
  o.max_new_tokens = a.max_new_tokens;
  o.temperature = a.temperature;
  o.top_k = a.top_k;
  o.top_p = a.top_p;
  o.seed = a.seed;
  return o;
}

void print_stats(const engine::GenerationResult& r) {
  const engine::GenerationStats& s = r.stats;
  std::fprintf(stderr,
               "\n[%lld prompt tokens (%lld reused), prefill %.1f tok/s | %lld generated, TTFT %.1f ms, "
               "TBT median %.1f ms mean %.1f ms, %.1f tok/s | %s]\n",
               static_cast<long long>(s.context_tokens), static_cast<long long>(s.reused_tokens),
               s.prefill_tokens_per_s, static_cast<long long>(s.generated_tokens), s.ttft_s * 1e3,
               s.tbt_median_s * 1e3, s.tbt_mean_s * 1e3, s.decode_tokens_per_s,
               engine::stop_reason_name(r.reason).c_str());
}

// BOS when a GGUF file asks for one and the text did not bring it (GPT-2 adds none).
void add_bos(const Loaded& l, const model::Tokenizer& tok, std::vector<std::int32_t>& ids) {
  const bool wanted = l.gguf && l.gguf->get_optional<bool>("tokenizer.ggml.add_bos_token").value_or(false);
  if (wanted && tok.bos_id() && (ids.empty() || ids.front() != *tok.bos_id())) ids.insert(ids.begin(), *tok.bos_id());
}

std::vector<std::int32_t> encode_turns(const Loaded& l, const model::Tokenizer& tok,
                                       const std::vector<model::ChatMessage>& messages) {
  std::vector<std::int32_t> ids = tok.encode(tok.apply_chat_template(messages, true), /*parse_special=*/true);
  add_bos(l, tok, ids);
  return ids;
}

int generate_from_ids(engine::CausalLm& model, const GenerateArgs& a) {
  engine::Generator gen(model, a.context);
  const std::vector<std::int32_t> ids = parse_ids(a.prompt_ids);
  const engine::GenerationResult r = gen.generate(ids, options_of(a), [](std::int32_t id) {
    std::printf("%d ", id);
    std::fflush(stdout);
    return true;
  });
  std::printf("\n");
  print_stats(r);
  return 0;
}

}  // namespace

int run_generate(const GenerateArgs& a) {
  Loaded l = load(a.model_path, a.device, a.weights, a.threads);
  if (!a.prompt_ids.empty()) return generate_from_ids(*l.model, a);
  const model::Tokenizer tok = l.tokenizer();
  // GPT-2 is no chat model: its prompt is used as is unless --chat asks for a template.
  const bool use_template = tok.has_chat_template() && (l.gguf ? !a.raw : a.chat);
  std::vector<std::int32_t> ids;
  if (use_template) {
    std::vector<model::ChatMessage> messages;
    if (!a.system.empty()) messages.push_back({"system", a.system});
    messages.push_back({"user", a.prompt});
    ids = encode_turns(l, tok, messages);
  } else {
    ids = tok.encode(a.prompt, /*parse_special=*/true);
    add_bos(l, tok, ids);
  }
  engine::GenerateOptions o = options_of(a);
  o.stop_ids = tok.stop_ids();
  engine::Generator gen(*l.model, a.context);
  model::StreamDecoder decoder(tok);
  const engine::GenerationResult r = gen.generate(ids, o, [&](std::int32_t id) {
    std::fputs(decoder.push(id).c_str(), stdout);
    std::fflush(stdout);
    return true;
  });
  std::fputs(decoder.flush().c_str(), stdout);
  std::fputs("\n", stdout);
  print_stats(r);
  return 0;
}

int run_chat(const GenerateArgs& a) {
  Loaded l = load(a.model_path, a.device, a.weights, a.threads);
  const model::Tokenizer tok = l.tokenizer();
  check_arg(tok.has_chat_template(), "ignis chat", "model", "a chat template (tokenizer.chat_template)", "none");
  engine::GenerateOptions o = options_of(a);
  o.stop_ids = tok.stop_ids();
  engine::Generator gen(*l.model, a.context);
  std::vector<model::ChatMessage> messages;
  if (!a.system.empty()) messages.push_back({"system", a.system});
  std::fprintf(stderr, "ignis chat: one message per line; /reset starts over, an empty line or EOF ends\n");
  std::string line;
  for (;;) {
    std::fprintf(stderr, "> ");
    if (!std::getline(std::cin, line) || line.empty()) break;
    if (line == "/reset") {
      messages.resize(a.system.empty() ? 0 : 1);
      gen.reset();
      continue;
    }
    messages.push_back({"user", line});
    // The whole conversation each turn: the generator reuses the cached prefix and runs only the new part.
    const std::vector<std::int32_t> ids = encode_turns(l, tok, messages);
    model::StreamDecoder decoder(tok);
    std::string reply;
    const engine::GenerationResult r = gen.generate(ids, o, [&](std::int32_t id) {
      const std::string piece = decoder.push(id);
      reply += piece;
      std::fputs(piece.c_str(), stdout);
      std::fflush(stdout);
      return true;
    });
    const std::string rest = decoder.flush();
    reply += rest;
    std::fputs((rest + "\n").c_str(), stdout);
    print_stats(r);
    messages.push_back({"assistant", reply});
  }
  return 0;
}

int run_bench(const BenchArgs& a) {
  check_arg(a.prompt_tokens >= 1, "ignis bench", "--prompt-tokens", ">= 1", a.prompt_tokens);
  check_arg(a.runs >= 1, "ignis bench", "--runs", ">= 1", a.runs);
  Loaded l = load(a.model_path, a.device, a.weights, a.threads);
  const std::int64_t vocab = l.model->vocab_size();
  // Fixed ids spread over the vocabulary: the same work on every run.
  std::vector<std::int32_t> ids(static_cast<std::size_t>(a.prompt_tokens));
  for (std::size_t i = 0; i < ids.size(); ++i)
    ids[i] = static_cast<std::int32_t>((i * 7919 + 13) % static_cast<std::size_t>(vocab));
  engine::GenerateOptions o;
  o.max_new_tokens = a.new_tokens;
  engine::Generator gen(*l.model, a.prompt_tokens + a.new_tokens);
  // Warm-up runs pay the one-time costs (GEMM plans, memory pools, graph capture) outside the
  // measured run, as peers' benchmarks do; reset() keeps the cache's buffers, so the captured
  // decode step is replayed from the first measured token.
  for (int i = 0; i < a.warmup; ++i) {
    gen.generate(ids, o);
    gen.reset();
  }
  std::vector<engine::GenerationStats> runs;
  for (int i = 0; i < a.runs; ++i) {
    if (i > 0) gen.reset();
    runs.push_back(gen.generate(ids, o).stats);
  }
  const engine::RunSummary summary = engine::summarize_runs(runs);
  const engine::GenerationStats& s = summary.median;
  const std::string format = engine::weight_format_name(l.options.weights.format);
  if (l.options.device.is_cuda())
    std::printf("model: %s (%s weights on %s, %s attention, %lld graph replays)\n", a.model_path.c_str(),
                format.c_str(), a.device.c_str(), l.attention_name(), static_cast<long long>(l.graph_replays()));
  else
    std::printf("model: %s (%s weights, %.0f MB, %d threads, %s)\n", a.model_path.c_str(), format.c_str(),
                static_cast<double>(l.model->weight_bytes()) / 1e6, a.threads,
                engine::linear_kernels_summary().c_str());
  std::printf("prefill: %lld tokens in %.1f ms: %.1f tok/s\n", static_cast<long long>(s.prefill_tokens),
              s.prefill_s * 1e3, s.prefill_tokens_per_s);
  std::printf("decode: %lld tokens, TTFT %.2f ms, TBT median %.2f ms mean %.2f ms: %.1f tok/s\n",
              static_cast<long long>(s.generated_tokens), s.ttft_s * 1e3, s.tbt_median_s * 1e3, s.tbt_mean_s * 1e3,
              s.decode_tokens_per_s);
  if (a.runs > 1)
    std::printf("runs: %d measured (medians above), TTFT min %.2f ms, max %.2f ms\n", a.runs,
                summary.ttft_min_s * 1e3, summary.ttft_max_s * 1e3);
  return 0;
}

}  // namespace ignis::cli
