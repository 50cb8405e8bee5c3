// Reference KV-cache append: hand-placed rows, lengths, the overflow error, and the identity
// that appending 2 tokens then 1 equals appending the 3 at once.
#include <gtest/gtest.h>

#include "harness/op_harness.h"
#include "ignis/error.h"
#include "ref/kv_cache.h"

namespace ignis {
namespace {

TEST(RefKvCache, HandValues) {
  // batch 2, max_seqlen 3, one head of dim 2. Sequence 0 holds 1 token, sequence 1 holds 2.
  const ref::KvCacheDims dims{2, 3, 1, 2};
  const std::vector<double> k_cache = {1, 1, 0, 0, 0, 0, 2, 2, 3, 3, 0, 0};
  const std::vector<double> v_cache = {-1, -1, 0, 0, 0, 0, -2, -2, -3, -3, 0, 0};
  const std::vector<std::int64_t> lengths = {1, 2};
  const std::vector<double> k_new = {10, 11, 20, 21}, v_new = {-10, -11, -20, -21};
  const auto out = ref::kv_cache_append(k_cache, v_cache, lengths, k_new, v_new, dims, 1);
  EXPECT_EQ(out.k, (std::vector<double>{1, 1, 10, 11, 0, 0, 2, 2, 3, 3, 20, 21}));
  EXPECT_EQ(out.v, (std::vector<double>{-1, -1, -10, -11, 0, 0, -2, -2, -3, -3, -20, -21}));
  EXPECT_EQ(out.lengths, (std::vector<std::int64_t>{2, 3}));
}

TEST(RefKvCache, ContextLengthExceeded) {
  const ref::KvCacheDims dims{2, 8, 1, 1};
  const std::vector<double> cache(16, 0.0), fresh(6, 1.0);
  const std::vector<std::int64_t> lengths = {2, 7};
  try {
    ref::kv_cache_append(cache, cache, lengths, fresh, fresh, dims, 3);
    FAIL() << "appending past max_seqlen must throw";
  } catch (const Error& e) {
    EXPECT_STREQ(e.what(),
                 "ref::kv_cache_append: context length exceeded: sequence 1 length + new_tokens: expected <= "
                 "max_seqlen 8, got 7 + 3");
  }
  // Filling the cache exactly is allowed.
  const std::vector<std::int64_t> fits = {5, 5};
  EXPECT_EQ(ref::kv_cache_append(cache, cache, fits, fresh, fresh, dims, 3).lengths,
            (std::vector<std::int64_t>{8, 8}));
}

TEST(RefKvCache, AppendsCompose) {
  auto rng = test::case_rng(31);
  const ref::KvCacheDims dims{2, 9, 3, 4};
  const std::int64_t row = dims.heads_kv * dims.head_dim;
  const auto k_cache = test::random_normal(rng, dims.batch * dims.max_seqlen * row);
  const auto v_cache = test::random_normal(rng, dims.batch * dims.max_seqlen * row);
  const auto k_new = test::random_normal(rng, dims.batch * 3 * row);
  const auto v_new = test::random_normal(rng, dims.batch * 3 * row);
  const std::vector<std::int64_t> lengths = {0, 4};
  const auto once = ref::kv_cache_append(k_cache, v_cache, lengths, k_new, v_new, dims, 3);

  // Tokens 0-1 of each sequence, then token 2.
  std::vector<double> k_first, v_first, k_last, v_last;
  for (std::int64_t b = 0; b < dims.batch; ++b) {
    const auto at = [&](std::int64_t t) { return (b * 3 + t) * row; };
    k_first.insert(k_first.end(), k_new.begin() + at(0), k_new.begin() + at(2));
    v_first.insert(v_first.end(), v_new.begin() + at(0), v_new.begin() + at(2));
    k_last.insert(k_last.end(), k_new.begin() + at(2), k_new.begin() + at(3));
    v_last.insert(v_last.end(), v_new.begin() + at(2), v_new.begin() + at(3));
  }
  const auto first = ref::kv_cache_append(k_cache, v_cache, lengths, k_first, v_first, dims, 2);
  const auto twice = ref::kv_cache_append(first.k, first.v, first.lengths, k_last, v_last, dims, 1);
  EXPECT_EQ(twice.k, once.k);
  EXPECT_EQ(twice.v, once.v);
  EXPECT_EQ(twice.lengths, once.lengths);
  // Appending nothing changes nothing.
  const auto none = ref::kv_cache_append(k_cache, v_cache, lengths, {}, {}, dims, 0);
  EXPECT_EQ(none.k, k_cache);
  EXPECT_EQ(none.lengths, lengths);
}

}  // namespace
}  // namespace ignis
