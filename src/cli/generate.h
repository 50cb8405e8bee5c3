#pragma once
// `ignis generate`, `ignis chat` and `ignis bench`: text generation with the engine.
#include <cstdint>
#include <string>

namespace ignis::cli {

struct GenerateArgs {
  std::string model_path;  // a GGUF file, or a Hugging Face GPT-2 folder or its .safetensors file
  std::string prompt;
  std::string prompt_ids;  // comma-separated ids instead of text: no tokenizer, ids printed
  std::string system;      // an optional system message (chat template only)
  std::int64_t max_new_tokens = 256;
  double temperature = 0.0;
  std::int64_t top_k = 0;
  double top_p = 1.0;
  std::uint64_t seed = 0;
  std::string device = "cpu";
  std::string weights;  // q8, bf16 or f32; empty: q8 on the CPU, bf16 on CUDA
  int threads = 2;
  bool raw = false;   // skip the chat template (GGUF models use theirs by default)
  bool chat = false;  // use the chat template (GPT-2 folders default to raw)
  std::int64_t context = 0;  // cache size; 0: the model's context length
};

// Streams the completion to stdout, then one stats line to stderr. Returns the exit code.
int run_generate(const GenerateArgs& args);
// Reads one user message per stdin line and answers each, keeping the conversation.
int run_chat(const GenerateArgs& args);

struct BenchArgs {
  std::string model_path;
  std::int64_t prompt_tokens = 64;
  std::int64_t new_tokens = 128;
  std::string device = "cpu";
  std::string weights;  // as GenerateArgs::weights
  int threads = 2;
  int warmup = 1;  // unmeasured runs before the measured ones
  int runs = 1;    // measured runs: each timing is reported as its median over them
};
// Greedy generation from fixed token ids (no tokenizer); prints prefill and decode speeds.
int run_bench(const BenchArgs& args);

}  // namespace ignis::cli
