// Writes the sample files as the fuzzers' seed corpus when IGNIS_FUZZ_CORPUS_DIR is set:
//   IGNIS_FUZZ_CORPUS_DIR=fuzz/corpus build/tests/ignis_tests --gtest_filter=FuzzCorpus.*
#include <gtest/gtest.h>

#include <cstdlib>

#include "model/sample_files.h"

namespace ignis::test {
namespace {

void write_file(const std::filesystem::path& path, const Bytes& bytes) {
  std::filesystem::create_directories(path.parent_path());
  std::ofstream out(path, std::ios::binary);
  out.write(reinterpret_cast<const char*>(bytes.data()), static_cast<std::streamsize>(bytes.size()));
  ASSERT_TRUE(out.good()) << path;
}

TEST(FuzzCorpus, WriteSeedFiles) {
  const char* dir = std::getenv("IGNIS_FUZZ_CORPUS_DIR");
  if (dir == nullptr) GTEST_SKIP() << "set IGNIS_FUZZ_CORPUS_DIR to write the seed corpus";
  const std::filesystem::path root(dir);
  write_file(root / "gguf" / "sample.gguf", sample_gguf());
  GgufWriter small;
  small.version = 2;
  small.add_string("general.architecture", "llama");
  small.add_tensor("w", model::GgmlType::Q4_1, {32}, q4_1_block());
  write_file(root / "gguf" / "small_v2.gguf", small.build());
  write_file(root / "safetensors" / "sample.safetensors", sample_safetensors());
}

}  // namespace
}  // namespace ignis::test
