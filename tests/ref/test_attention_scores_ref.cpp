// Reference attention scores: hand values, the bottom-right causal mask in both seqlen orders,
// GQA equal to repeating kv heads, and agreement with the reference GEMM NT per head.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>

#include "harness/op_harness.h"
#include "ref/attention_scores.h"
#include "ref/gemm.h"

namespace ignis {
namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();

TEST(RefAttentionScores, HandValues) {
  // q = [1, 2]; keys [3, 4] and [5, 6]: dots 11 and 17, scaled by 0.5.
  const ref::ScoresDims dims{1, 1, 2, 1, 1, 2};
  const auto s = ref::attention_scores(std::vector<double>{1, 2}, std::vector<double>{3, 4, 5, 6}, dims, 0.5, false);
  EXPECT_EQ(s, (std::vector<double>{5.5, 8.5}));
}

// Which entries the causal mask hides, with all q and k ones (every visible score = head_dim).
std::vector<double> causal_pattern(std::int64_t seqlen_q, std::int64_t seqlen_k) {
  const ref::ScoresDims dims{1, seqlen_q, seqlen_k, 1, 1, 1};
  return ref::attention_scores(std::vector<double>(seqlen_q, 1.0), std::vector<double>(seqlen_k, 1.0), dims, 1.0,
                               true);
}

TEST(RefAttentionScores, CausalMaskIsBottomRightAligned) {
  // seqlen_q 2 < seqlen_k 3: query i sees keys j <= i + 1.
  EXPECT_EQ(causal_pattern(2, 3), (std::vector<double>{1, 1, -kInf, 1, 1, 1}));
  // seqlen_q 3 > seqlen_k 2: query 0 sees nothing, query 1 key 0, query 2 both.
  EXPECT_EQ(causal_pattern(3, 2), (std::vector<double>{-kInf, -kInf, 1, -kInf, 1, 1}));
  // Square: the usual lower triangle.
  EXPECT_EQ(causal_pattern(2, 2), (std::vector<double>{1, -kInf, 1, 1}));
}

TEST(RefAttentionScores, GqaEqualsRepeatedKvHeads) {
  auto rng = test::case_rng(41);
  const std::int64_t batch = 2, sq = 3, sk = 5, hq = 6, hkv = 2, d = 4;
  const auto q = test::random_normal(rng, batch * sq * hq * d);
  const auto k = test::random_normal(rng, batch * sk * hkv * d);
  // Repeat each kv head hq / hkv times: query head h then reads repeated head h.
  std::vector<double> k_rep;
  for (std::int64_t b = 0; b < batch; ++b)
    for (std::int64_t j = 0; j < sk; ++j)
      for (std::int64_t h = 0; h < hq; ++h) {
        const auto src = k.begin() + ((b * sk + j) * hkv + h / (hq / hkv)) * d;
        k_rep.insert(k_rep.end(), src, src + d);
      }
  const auto gqa = ref::attention_scores(q, k, {batch, sq, sk, hq, hkv, d}, 0.3, true);
  const auto mha = ref::attention_scores(q, k_rep, {batch, sq, sk, hq, hq, d}, 0.3, true);
  EXPECT_EQ(gqa, mha);
}

TEST(RefAttentionScores, MatchesGemmNtPerHead) {
  auto rng = test::case_rng(42);
  const std::int64_t batch = 2, sq = 4, sk = 3, hq = 2, d = 5;
  const auto q = test::random_normal(rng, batch * sq * hq * d);
  const auto k = test::random_normal(rng, batch * sk * hq * d);
  const double scale = 1.0 / std::sqrt(static_cast<double>(d));
  const auto s = ref::attention_scores(q, k, {batch, sq, sk, hq, hq, d}, scale, false);
  for (std::int64_t b = 0; b < batch; ++b)
    for (std::int64_t h = 0; h < hq; ++h) {
      std::vector<double> qh, kh;
      for (std::int64_t i = 0; i < sq; ++i)
        qh.insert(qh.end(), q.begin() + ((b * sq + i) * hq + h) * d, q.begin() + ((b * sq + i) * hq + h + 1) * d);
      for (std::int64_t j = 0; j < sk; ++j)
        kh.insert(kh.end(), k.begin() + ((b * sk + j) * hq + h) * d, k.begin() + ((b * sk + j) * hq + h + 1) * d);
      const auto expected = ref::gemm_nt(qh, kh, {}, {1, sq, sk, d}, scale);
      for (std::int64_t e = 0; e < sq * sk; ++e)
        EXPECT_NEAR(s[(b * hq + h) * sq * sk + e], expected[e], 1e-14) << "b " << b << " h " << h << " e " << e;
    }
}

}  // namespace
}  // namespace ignis
