#pragma once
// The Hugging Face transformers golden run on the bundled SmolLM2 (scripts/hf_golden.py):
// tests/engine/data/smollm2_golden.json and smollm2_hf_logits.f32.
#include <nlohmann/json.hpp>

#include <cstdint>
#include <fstream>
#include <string>
#include <vector>

#include "model/model_paths.h"

namespace ignis::test {

struct HfGoldenData {
  std::string prompt;
  std::vector<std::int32_t> prompt_ids, greedy_float32, greedy_float64;
  std::vector<float> last_logits;  // the last prompt position, from transformers in float64
};

inline HfGoldenData load_hf_golden() {
  const auto dir = source_root() / "tests/engine/data";
  std::ifstream json_file(dir / "smollm2_golden.json");
  const nlohmann::json j = nlohmann::json::parse(json_file);
  HfGoldenData g;
  g.prompt = j.at("prompt").get<std::string>();
  g.prompt_ids = j.at("prompt_ids").get<std::vector<std::int32_t>>();
  g.greedy_float32 = j.at("greedy_float32").get<std::vector<std::int32_t>>();
  g.greedy_float64 = j.at("greedy_float64").get<std::vector<std::int32_t>>();
  std::ifstream logits_file(dir / "smollm2_hf_logits.f32", std::ios::binary);
  logits_file.seekg(0, std::ios::end);
  g.last_logits.resize(static_cast<std::size_t>(logits_file.tellg()) / sizeof(float));
  logits_file.seekg(0);
  logits_file.read(reinterpret_cast<char*>(g.last_logits.data()),
                   static_cast<std::streamsize>(g.last_logits.size() * sizeof(float)));
  return g;
}

}  // namespace ignis::test
