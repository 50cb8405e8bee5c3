// The `ignis` command line: `info` (build, GPU, the model's metadata), `selfcheck` (runs each
// available op implementation against the CPU reference on random data), `generate`, `chat`
// and `bench` (the inference engine).
#include <CLI/CLI.hpp>

#include <cstdio>
#include <filesystem>
#include <string>

#include "cli/generate.h"
#include "cli/selfcheck.h"
#include "ignis/device.h"
#include "ignis/error.h"
#include "model/gguf.h"
#include "model/gguf_describe.h"

namespace {

int run_info(const std::string& model_path) {
  std::printf("ignis %s\n", IGNIS_VERSION);
  std::printf("cuda kernels: %s\n", IGNIS_WITH_CUDA ? "built" : "not built");
  std::printf("gpu: %s\n", ignis::cuda_device_summary().c_str());
  std::error_code ec;
  const auto size = std::filesystem::file_size(model_path, ec);
  if (ec)
    std::printf("model: %s (not found: run scripts/setup.sh)\n", model_path.c_str());
  else
    std::printf("model: %s (%.1f MB)\n%s", model_path.c_str(), static_cast<double>(size) / 1e6,
                ignis::model::describe_gguf(ignis::model::GgufFile::open(model_path)).c_str());
  return 0;
}

constexpr const char* kModelHelp =
    "Model: a GGUF file, or a Hugging Face GPT-2 folder (config.json, model.safetensors, tokenizer.json)";

// The options `generate` and `chat` share.
void add_generation_options(CLI::App* app, ignis::cli::GenerateArgs& a) {
  app->add_option("--model", a.model_path, kModelHelp)->capture_default_str();
  app->add_option("-n,--max-tokens", a.max_new_tokens, "Most tokens to generate")->capture_default_str();
  app->add_option("--temperature", a.temperature, "Sampling temperature; 0 is greedy")->capture_default_str();
  app->add_option("--top-k", a.top_k, "Keep the k most likely tokens; 0 keeps all")->capture_default_str();
  app->add_option("--top-p", a.top_p, "Keep the smallest set of tokens with this probability mass")
      ->capture_default_str();
  app->add_option("--seed", a.seed, "Sampling seed")->capture_default_str();
  app->add_option("--device", a.device, "cpu or cuda")->capture_default_str();
  app->add_option("--weights", a.weights,
                  "Weight storage: q8, bf16 or f32 (default q8 on cpu, bf16 on cuda; cuda takes bf16 or f32)");
  app->add_option("--threads", a.threads, "CPU threads")->capture_default_str();
  app->add_option("--context", a.context, "KV cache length; 0 is the model's context length")->capture_default_str();
  app->add_option("--system", a.system, "System message (chat template)");
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"ignis: attention kernels and an LLM inference engine"};
  app.require_subcommand(1);

  std::string model_path = IGNIS_DEFAULT_MODEL;
  auto* info = app.add_subcommand("info", "Show the build, the GPU and the default model");
  info->add_option("model", model_path, "Model file")->capture_default_str();

  std::string device_name = "all";
  auto* selfcheck = app.add_subcommand("selfcheck", "Check every available op against the CPU reference");
  selfcheck->add_option("--device", device_name, "cpu, cuda or all")->capture_default_str();

  ignis::cli::GenerateArgs gen_args;
  gen_args.model_path = IGNIS_DEFAULT_MODEL;
  auto* generate = app.add_subcommand("generate", "Generate text after a prompt");
  add_generation_options(generate, gen_args);
  generate->add_option("-p,--prompt", gen_args.prompt, "Prompt text");
  generate->add_option("--prompt-ids", gen_args.prompt_ids, "Prompt as comma-separated token ids (prints ids)");
  auto* chat_flag = generate->add_flag(
      "--chat", gen_args.chat, "Wrap the prompt in the model's chat template (the default for GGUF models)");
  generate->add_flag("--raw", gen_args.raw, "Use the prompt as is, without the chat template (the default for GPT-2)")
      ->excludes(chat_flag);

  ignis::cli::GenerateArgs chat_args;
  chat_args.model_path = IGNIS_DEFAULT_MODEL;
  auto* chat = app.add_subcommand("chat", "Chat interactively (one message per line on stdin)");
  add_generation_options(chat, chat_args);

  ignis::cli::BenchArgs bench_args;
  bench_args.model_path = IGNIS_DEFAULT_MODEL;
  auto* bench = app.add_subcommand("bench", "Measure prefill and greedy decode speed");
  bench->add_option("--model", bench_args.model_path, kModelHelp)->capture_default_str();
  bench->add_option("--prompt-tokens", bench_args.prompt_tokens, "Prompt length")->capture_default_str();
  bench->add_option("-n,--new-tokens", bench_args.new_tokens, "Tokens to decode")->capture_default_str();
  bench->add_option("--device", bench_args.device, "cpu or cuda")->capture_default_str();
  bench->add_option("--weights", bench_args.weights, "q8, bf16 or f32 (default q8 on cpu, bf16 on cuda)");
  bench->add_option("--threads", bench_args.threads, "CPU threads")->capture_default_str();
  bench->add_option("--warmup", bench_args.warmup, "Unmeasured runs first")
      ->capture_default_str()
      ->check(CLI::NonNegativeNumber);
  bench->add_option("--runs", bench_args.runs, "Measured runs; each timing is their median")
      ->capture_default_str()
      ->check(CLI::PositiveNumber);

  CLI11_PARSE(app, argc, argv);
  try {
    if (info->parsed()) return run_info(model_path);
    if (selfcheck->parsed()) return ignis::cli::run_selfcheck(device_name);
    if (generate->parsed()) {
      if (gen_args.prompt.empty() == gen_args.prompt_ids.empty()) {
        std::fprintf(stderr, "ignis: error: generate: expected one of -p/--prompt or --prompt-ids\n");
        return 2;
      }
      return ignis::cli::run_generate(gen_args);
    }
    if (chat->parsed()) return ignis::cli::run_chat(chat_args);
    if (bench->parsed()) return ignis::cli::run_bench(bench_args);
  } catch (const ignis::Error& e) {
    std::fprintf(stderr, "ignis: error: %s\n", e.what());
    return 1;
  }
  return 0;
}
