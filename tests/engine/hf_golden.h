#pragma once
// The Hugging Face transformers golden run on the bundled SmolLM2 (scripts/hf_golden.py):
// tests/engine/data/smollm2_golden.json and smollm2_hf_logits.f32.
#include <nlohmann/json.hpp>

#include <cstdint>
#include <fstream>
#include <stdexcept>
#include <string>
#include <vector>

#include "model/model_paths.h"

namespace ignis::test {

struct HfGoldenData {
  std::string prompt;
  std::vector<std::int32_t> prompt_ids, greedy_float32, greedy_float64;
  std::vector<float> last_logits;  // the last prompt position, from transformers in float64
};

// Throws, naming the file, when a committed golden file is missing or the wrong size.
inline HfGoldenData load_hf_golden() {
  const auto dir = source_root() / "tests/engine/data";
  std::ifstream json_file(dir / "smollm2_golden.json");
  if (!json_file) throw std::runtime_error("cannot open " + (dir / "smollm2_golden.json").string());
  const nlohmann::json j = nlohmann::json::parse(json_file);
  HfGoldenData g;
  g.prompt = j.at("prompt").get<std::string>();
  g.prompt_ids = j.at("prompt_ids").get<std::vector<std::int32_t>>();
  g.greedy_float32 = j.at("greedy_float32").get<std::vector<std::int32_t>>();
  g.greedy_float64 = j.at("greedy_float64").get<std::vector<std::int32_t>>();
  const auto logits_path = dir / "smollm2_hf_logits.f32";
  std::ifstream logits_file(logits_path, std::ios::binary | std::ios::ate);
  const std::streamoff bytes = logits_file ? static_cast<std::streamoff>(logits_file.tellg()) : -1;
  if (bytes <= 0 || bytes % static_cast<std::streamoff>(sizeof(float)) != 0)
    throw std::runtime_error(logits_path.string() + ": expected a non-empty file of f32 values, got " +
                             std::to_string(bytes) + " bytes");
  g.last_logits.resize(static_cast<std::size_t>(bytes) / sizeof(float));
  logits_file.seekg(0);
  logits_file.read(reinterpret_cast<char*>(g.last_logits.data()), bytes);
  if (!logits_file) throw std::runtime_error("cannot read " + logits_path.string());
  return g;
}

}  // namespace ignis::test
