// The bundled SmolLM2-135M-Instruct Q4_1 GGUF opens and reads as the Llama model it is.
// Skipped when the file is absent (run scripts/setup.sh to fetch it).
#include <gtest/gtest.h>

#include <cmath>

#include "model/gguf.h"
#include "model/gguf_describe.h"
#include "model/model_paths.h"

namespace ignis::model {
namespace {

TEST(GgufSmolLM2, OpensAsLlama) {
  const std::string path = test::find_smollm2();
  if (path.empty()) GTEST_SKIP() << "SmolLM2 GGUF not found (scripts/setup.sh fetches it)";
  const GgufFile g = GgufFile::open(path);
  std::printf("%s", describe_gguf(g).c_str());
  EXPECT_EQ(g.get_string("general.architecture"), "llama");
  EXPECT_EQ(g.get_u32("llama.block_count"), 30u);
  EXPECT_EQ(g.get_u32("llama.embedding_length"), 576u);
  EXPECT_EQ(g.get_u32("llama.attention.head_count"), 9u);
  EXPECT_EQ(g.get_u32("llama.attention.head_count_kv"), 3u);
  EXPECT_EQ(g.get_int("llama.block_count"), 30);
  EXPECT_EQ(g.get_array_size("tokenizer.ggml.tokens"), 49152u);
  const auto tokens = g.get_array<std::string>("tokenizer.ggml.tokens");
  ASSERT_EQ(tokens.size(), 49152u);

  const GgufTensor& embd = g.tensor("token_embd.weight");
  EXPECT_EQ(embd.shape, (std::vector<std::int64_t>{49152, 576}));
  const std::vector<float> w = dequantize(embd);
  ASSERT_EQ(w.size(), 49152u * 576u);
  std::size_t nonzero = 0;
  for (float x : w) {
    ASSERT_TRUE(std::isfinite(x));
    nonzero += x != 0.0f;
  }
  EXPECT_GT(nonzero, w.size() / 2);

  // Every tensor of the file lies inside it and has a type the engine can decode.
  for (const GgufTensor& t : g.tensors())
    EXPECT_TRUE(ggml_can_dequantize(t.type)) << t.name << " " << ggml_type_name(t.type);
  const GgufTensor& q = g.tensor("blk.0.attn_q.weight");
  EXPECT_EQ(q.shape, (std::vector<std::int64_t>{576, 576}));
  EXPECT_EQ(g.tensor("blk.0.attn_k.weight").shape, (std::vector<std::int64_t>{192, 576}));
}

}  // namespace
}  // namespace ignis::model
