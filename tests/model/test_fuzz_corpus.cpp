// The fuzzers' seed corpus (fuzz/corpus) is the sample files of model/sample_files.h. The corpus
// test checks the committed files still are; WriteSeedFiles rewrites them when IGNIS_FUZZ_CORPUS_DIR is set:
//   IGNIS_FUZZ_CORPUS_DIR=fuzz/corpus build/tests/ignis_tests --gtest_filter=FuzzCorpus.WriteSeedFiles
#include <gtest/gtest.h>

#include <cstddef>
#include <cstdlib>
#include <fstream>
#include <iterator>
#include <utility>
#include <vector>

#include "model/model_paths.h"
#include "model/sample_files.h"

namespace ignis::test {
namespace {

void write_file(const std::filesystem::path& path, const Bytes& bytes) {
  std::filesystem::create_directories(path.parent_path());
  std::ofstream out(path, std::ios::binary);
  out.write(reinterpret_cast<const char*>(bytes.data()), static_cast<std::streamsize>(bytes.size()));
  ASSERT_TRUE(out.good()) << path;
}

// Each seed file's path under the corpus folder and its bytes.
std::vector<std::pair<std::filesystem::path, Bytes>> seed_files() {
  GgufWriter small;
  small.version = 2;
  small.add_string("general.architecture", "llama");
  small.add_tensor("w", model::GgmlType::Q4_1, {32}, q4_1_block());
  return {{"gguf/sample.gguf", sample_gguf()},
          {"gguf/small_v2.gguf", small.build()},
          {"safetensors/sample.safetensors", sample_safetensors()}};
}

TEST(FuzzCorpus, CommittedSeedsAreTheSampleFiles) {
  const std::filesystem::path root = source_root() / "fuzz/corpus";
  for (const auto& [name, bytes] : seed_files()) {
    std::ifstream in(root / name, std::ios::binary);
    ASSERT_TRUE(in) << (root / name) << " is missing (rewrite the corpus: see this file's header)";
    Bytes committed;
    for (auto it = std::istreambuf_iterator<char>(in); it != std::istreambuf_iterator<char>(); ++it)
      committed.push_back(static_cast<std::byte>(*it));
    EXPECT_EQ(committed, bytes) << name << " differs from its sample file (rewrite the corpus: see this file's header)";
  }
}

TEST(FuzzCorpus, WriteSeedFiles) {
  const char* dir = std::getenv("IGNIS_FUZZ_CORPUS_DIR");
  if (dir == nullptr) GTEST_SKIP() << "set IGNIS_FUZZ_CORPUS_DIR to write the seed corpus";
  for (const auto& [name, bytes] : seed_files()) write_file(std::filesystem::path(dir) / name, bytes);
}

}  // namespace
}  // namespace ignis::test
