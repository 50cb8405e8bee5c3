// GGUF <-> HF row order of Llama q/k weights.
#include <gtest/gtest.h>

#include <numeric>

#include "model/error_text.h"
#include "model/gguf_llama_permute.h"

namespace ignis::model {
namespace {

TEST(GgufLlamaPermute, OneHeadOfFourByHand) {
  // HF rows r0..r3 (pairs (0,2), (1,3)), two columns each: row k = {10k, 10k + 1}.
  const std::vector<float> hf = {0, 1, 10, 11, 20, 21, 30, 31};
  // GGUF stores the pairs adjacent: [r0, r2, r1, r3].
  const std::vector<float> gguf = {0, 1, 20, 21, 10, 11, 30, 31};
  EXPECT_EQ(permute_qk_rows(hf, 1, 4), gguf);
  EXPECT_EQ(unpermute_qk_rows(gguf, 1, 4), hf);
  EXPECT_EQ(gguf_row_of_hf_row(0, 4), 0);
  EXPECT_EQ(gguf_row_of_hf_row(1, 4), 2);
  EXPECT_EQ(gguf_row_of_hf_row(2, 4), 1);
  EXPECT_EQ(gguf_row_of_hf_row(3, 4), 3);
}

TEST(GgufLlamaPermute, TwoHeadsOfSixByHand) {
  // head_dim 6: HF row h = half * 3 + i goes to GGUF row 2i + half: GGUF = [r0, r3, r1, r4, r2, r5];
  // the second head is permuted the same way within itself. One column, value = HF row.
  std::vector<float> hf(12);
  std::iota(hf.begin(), hf.end(), 0.0f);
  const std::vector<float> gguf = {0, 3, 1, 4, 2, 5, 6, 9, 7, 10, 8, 11};
  EXPECT_EQ(permute_qk_rows(hf, 2, 6), gguf);
  EXPECT_EQ(unpermute_qk_rows(gguf, 2, 6), hf);
}

TEST(GgufLlamaPermute, PermuteThenUnpermuteIsIdentity) {
  for (const auto& [n_heads, head_dim, cols] : {std::tuple{9, 64, 5}, std::tuple{3, 8, 1}, std::tuple{4, 128, 3}}) {
    std::vector<float> w(static_cast<std::size_t>(n_heads * head_dim * cols));
    std::iota(w.begin(), w.end(), 0.0f);
    const auto p = permute_qk_rows(w, n_heads, head_dim);
    EXPECT_NE(p, w) << n_heads << "x" << head_dim;
    EXPECT_EQ(unpermute_qk_rows(p, n_heads, head_dim), w);
    EXPECT_EQ(permute_qk_rows(unpermute_qk_rows(w, n_heads, head_dim), n_heads, head_dim), w);
  }
}

TEST(GgufLlamaPermute, RawRowsOfAnyWidth) {
  // Rows of 3 bytes, as a quantized row's raw blocks would be moved.
  std::vector<std::byte> src(4 * 3);
  for (std::size_t i = 0; i < src.size(); ++i) src[i] = static_cast<std::byte>(i);
  std::vector<std::byte> dst(src.size());
  unpermute_qk_rows(src, dst, 1, 4);
  // GGUF [g0, g1, g2, g3] holds HF [r0, r2, r1, r3], so HF order is [g0, g2, g1, g3].
  const std::vector<int> want_rows = {0, 2, 1, 3};
  for (std::size_t r = 0; r < 4; ++r)
    for (std::size_t c = 0; c < 3; ++c)
      EXPECT_EQ(dst[r * 3 + c], static_cast<std::byte>(want_rows[r] * 3 + static_cast<int>(c)));
}

TEST(GgufLlamaPermute, BadArguments) {
  const std::vector<float> w(12);
  EXPECT_ERROR_CONTAINS(permute_qk_rows(w, 1, 3), "permute_qk_rows: head_dim: expected a positive even number, got 3");
  EXPECT_ERROR_CONTAINS(unpermute_qk_rows(w, 0, 4), "unpermute_qk_rows: n_heads: expected > 0, got 0");
  EXPECT_ERROR_CONTAINS(unpermute_qk_rows(w, 5, 2), "size: expected a multiple of 10 rows, got 12");
  EXPECT_TRUE(unpermute_qk_rows(std::vector<float>{}, 2, 4).empty());
  std::vector<std::byte> src(8), dst(4);
  EXPECT_ERROR_CONTAINS(unpermute_qk_rows(src, dst, 1, 2), "dst size: expected 8, got 4");
}

}  // namespace
}  // namespace ignis::model
