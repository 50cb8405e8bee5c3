// The reference rope_qkv_append: a hand-derived token (rotation at the cache length, k and v in
// the cache row, length advanced), identities with the separate reference ops, and the overflow.
#include <gtest/gtest.h>

#include <cmath>

#include "harness/op_harness.h"
#include "ignis/error.h"
#include "model/error_text.h"
#include "ref/rope.h"
#include "ref/rope_append.h"

namespace ignis {
namespace {

TEST(RopeAppendRef, HandValues) {
  // One q head and one kv head of dim 2 at position 2 with inv_freq 0.5: angle 1, factor 2.
  const std::vector<double> qkv = {1, 0, 0, 1, 5, 6}, inv_freq = {0.5};
  const std::vector<double> cache(4 * 2, 0.0);
  const ref::RopeAppendDims d{1, 1, 1, 2, 4, 2, false};
  const auto r = ref::rope_qkv_append(qkv, inv_freq, cache, cache, 2, d, 2.0);
  const double c = 2 * std::cos(1.0), s = 2 * std::sin(1.0);
  ASSERT_EQ(r.q.size(), 2u);
  EXPECT_NEAR(r.q[0], c, 1e-15);
  EXPECT_NEAR(r.q[1], s, 1e-15);
  EXPECT_EQ(r.cache.k, (std::vector<double>{0, 0, 0, 0, -s, c, 0, 0}));
  EXPECT_EQ(r.cache.v, (std::vector<double>{0, 0, 0, 0, 5, 6, 0, 0}));
  EXPECT_EQ(r.cache.lengths, (std::vector<std::int64_t>{3}));
}

TEST(RopeAppendRef, SplitsTokensIntoHeads) {
  // Two tokens, two q heads, one kv head, partial rotary dim, interleaved pairs: q and k are the
  // rope of their slices of qkv, v is copied as is.
  auto rng = test::case_rng(9200);
  const ref::RopeAppendDims d{2, 2, 1, 4, 5, 2, true};
  const std::int64_t width = (d.heads_q + 2 * d.heads_kv) * d.head_dim;
  const auto qkv = test::random_normal(rng, d.tokens * width);
  const std::vector<double> inv_freq = {0.3};
  const std::vector<double> cache(d.max_seqlen * d.heads_kv * d.head_dim, 0.0);
  const auto r = ref::rope_qkv_append(qkv, inv_freq, cache, cache, 1, d, 1.0);
  const std::int64_t start[] = {1};
  for (std::int64_t t = 0; t < d.tokens; ++t) {
    const auto* row = qkv.data() + t * width;
    const std::vector<double> q(row, row + 8), k(row + 8, row + 12), v(row + 12, row + 16);
    const std::int64_t pos[] = {start[0] + t};
    const auto q_rot = ref::rope_apply(q, inv_freq, {1, 1, 2, 4, 2, true}, pos, 1.0, 1);
    const auto k_rot = ref::rope_apply(k, inv_freq, {1, 1, 1, 4, 2, true}, pos, 1.0, 1);
    for (int e = 0; e < 8; ++e) EXPECT_NEAR(r.q[t * 8 + e], q_rot[e], 1e-15);
    for (int e = 0; e < 4; ++e) {
      EXPECT_NEAR(r.cache.k[(1 + t) * 4 + e], k_rot[e], 1e-15);
      EXPECT_EQ(r.cache.v[(1 + t) * 4 + e], v[e]);
    }
  }
}

TEST(RopeAppendRef, ThrowsWhenTheContextIsFull) {
  const std::vector<double> qkv(2 * 6, 1.0), inv_freq = {1.0}, cache(4 * 2, 0.0);
  const ref::RopeAppendDims d{2, 1, 1, 2, 4, 2, false};
  EXPECT_NO_THROW(ref::rope_qkv_append(qkv, inv_freq, cache, cache, 2, d, 1.0));
  EXPECT_ERROR_CONTAINS(ref::rope_qkv_append(qkv, inv_freq, cache, cache, 3, d, 1.0), "context length exceeded");
}

}  // namespace
}  // namespace ignis
