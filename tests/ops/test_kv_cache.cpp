// Every KV-cache append implementation against the reference: prefill then decode steps on
// the same cache (the device lengths must advance), odd row sizes, the overflow error (raised
// before anything is written) and bad arguments.
#include <gtest/gtest.h>

#include <random>

#include "harness/op_harness.h"
#include "ignis/ops.h"
#include "model/error_text.h"
#include "ref/kv_cache.h"

namespace ignis {
namespace {

using test::Impl;

class KvCacheOp : public testing::TestWithParam<Impl> {};

struct Cache {
  Tensor k, v, lengths;
  std::vector<std::int64_t> host_lengths;
  ref::KvCacheState expected;
};

Cache make_cache(const Impl& impl, const ref::KvCacheDims& d, std::vector<std::int64_t> lengths,
                 std::mt19937_64& rng) {
  const Shape shape{d.batch, d.max_seqlen, d.heads_kv, d.head_dim};
  const std::int64_t n = d.batch * d.max_seqlen * d.heads_kv * d.head_dim;
  Cache c;
  c.expected.k = test::quantize(test::random_normal(rng, n), impl.dtype);
  c.expected.v = test::quantize(test::random_normal(rng, n), impl.dtype);
  c.expected.lengths = lengths;
  c.k = test::make_tensor(c.expected.k, shape, impl.dtype, impl.device);
  c.v = test::make_tensor(c.expected.v, shape, impl.dtype, impl.device);
  c.lengths = test::make_tensor({lengths.begin(), lengths.end()}, {d.batch}, DType::i32, impl.device);
  c.host_lengths = std::move(lengths);
  return c;
}

// Appends `new_tokens` random rows to both the op's cache and the expected state, then compares.
void append_and_check(const Impl& impl, const ref::KvCacheDims& d, Cache& c, std::int64_t new_tokens,
                      std::mt19937_64& rng) {
  SCOPED_TRACE(testing::Message() << impl << " batch " << d.batch << " max_seqlen " << d.max_seqlen << " heads_kv "
                                  << d.heads_kv << " head_dim " << d.head_dim << " new_tokens " << new_tokens);
  const Shape shape{d.batch, new_tokens, d.heads_kv, d.head_dim};
  const auto k_new =
      test::quantize(test::random_normal(rng, d.batch * new_tokens * d.heads_kv * d.head_dim), impl.dtype);
  const auto v_new = test::quantize(test::random_normal(rng, k_new.size()), impl.dtype);
  kv_cache_append(c.k, c.v, test::make_tensor(k_new, shape, impl.dtype, impl.device),
                  test::make_tensor(v_new, shape, impl.dtype, impl.device), c.lengths, c.host_lengths);
  c.expected = ref::kv_cache_append(c.expected.k, c.expected.v, c.expected.lengths, k_new, v_new, d, new_tokens);
  // Copies are exact: the naive result is the reference itself.
  EXPECT_TRUE(test::close_to_reference(test::read_tensor(c.k), c.expected.k, impl.dtype, c.expected.k));
  EXPECT_TRUE(test::close_to_reference(test::read_tensor(c.v), c.expected.v, impl.dtype, c.expected.v));
  EXPECT_EQ(c.host_lengths, c.expected.lengths);
  const std::vector<double> device_lengths(c.expected.lengths.begin(), c.expected.lengths.end());
  EXPECT_EQ(test::read_tensor(c.lengths), device_lengths);
}

TEST_P(KvCacheOp, PrefillThenDecode) {
  const Impl impl = GetParam();
  IGNIS_SKIP_UNLESS(impl, kv_cache_supported(impl.device, impl.dtype));
  struct Case {
    ref::KvCacheDims dims;
    std::vector<std::int64_t> lengths;
    std::int64_t prefill;
  };
  const std::vector<Case> cases = {
      {{1, 8, 1, 1}, {0}, 3},                 // 2- to 8-byte rows: the narrowest copy units
      {{2, 40, 3, 17}, {0, 11}, 17},          // 51-element rows: odd byte counts
      {{3, 20, 2, 64}, {5, 0, 19}, 0},        // 16-byte units; a sequence one token from full
      {{2, 1030, 1, 3}, {0, 4}, 1023},        // a long prefill
      {{2, 130, 4, 128}, {113, 1}, 1},        // decode-shaped rows
  };
  std::uint64_t salt = 600;
  for (const Case& tc : cases) {
    auto rng = test::case_rng(++salt);
    Cache c = make_cache(impl, tc.dims, tc.lengths, rng);
    append_and_check(impl, tc.dims, c, tc.prefill, rng);
    std::int64_t longest = 0;
    for (std::int64_t len : c.host_lengths) longest = std::max(longest, len);
    if (longest < tc.dims.max_seqlen) append_and_check(impl, tc.dims, c, 1, rng);  // a decode step
  }
}

TEST_P(KvCacheOp, ContextLengthExceededWritesNothing) {
  const Impl impl = GetParam();
  IGNIS_SKIP_UNLESS(impl, kv_cache_supported(impl.device, impl.dtype));
  auto rng = test::case_rng(700);
  const ref::KvCacheDims d{2, 8, 1, 4};
  Cache c = make_cache(impl, d, {2, 6}, rng);
  const Shape shape{2, 3, 1, 4};
  Tensor fresh = test::make_tensor(test::random_normal(rng, 24), shape, impl.dtype, impl.device);
  try {
    kv_cache_append(c.k, c.v, fresh, fresh, c.lengths, c.host_lengths);
    FAIL() << "appending past max_seqlen must throw";
  } catch (const Error& e) {
    EXPECT_STREQ(e.what(),
                 "kv_cache_append: context length exceeded: sequence 1 length + new_tokens: expected <= max_seqlen "
                 "8, got 6 + 3");
  }
  EXPECT_EQ(c.host_lengths, (std::vector<std::int64_t>{2, 6}));
  EXPECT_EQ(test::read_tensor(c.lengths), (std::vector<double>{2, 6}));
  EXPECT_EQ(test::read_tensor(c.k), c.expected.k);
  EXPECT_EQ(test::read_tensor(c.v), c.expected.v);
}

TEST_P(KvCacheOp, RejectsBadArguments) {
  const Impl impl = GetParam();
  IGNIS_SKIP_UNLESS(impl, kv_cache_supported(impl.device, impl.dtype));
  auto make = [&](const Shape& shape) { return test::make_poisoned(shape, impl.dtype, impl.device); };
  Tensor cache = make({2, 8, 2, 4}), fresh = make({2, 1, 2, 4});
  Tensor lengths = test::make_tensor({0, 0}, {2}, DType::i32, impl.device);
  std::vector<std::int64_t> host = {0, 0};
  EXPECT_ERROR_CONTAINS(kv_cache_append(cache, make({2, 8, 2, 5}), fresh, fresh, lengths, host),
                        "kv_cache_append: v_cache.shape");
  EXPECT_ERROR_CONTAINS(kv_cache_append(cache, cache, make({2, 1, 3, 4}), fresh, lengths, host),
                        "kv_cache_append: k_new.shape");
  EXPECT_ERROR_CONTAINS(kv_cache_append(cache, cache, fresh, make({2, 2, 2, 4}), lengths, host),
                        "kv_cache_append: v_new.shape");
  EXPECT_ERROR_CONTAINS(kv_cache_append(cache, cache, make({1, 1, 2, 4}), make({1, 1, 2, 4}), lengths, host),
                        "kv_cache_append: k_new.shape");
  EXPECT_ERROR_CONTAINS(kv_cache_append(cache, cache, fresh, fresh,
                                        test::make_tensor({0, 0}, {2}, DType::i64, impl.device), host),
                        "kv_cache_append: lengths.dtype");
  EXPECT_ERROR_CONTAINS(kv_cache_append(cache, cache, fresh, fresh,
                                        test::make_tensor({0}, {1}, DType::i32, impl.device), host),
                        "kv_cache_append: lengths.shape");
  std::vector<std::int64_t> short_host = {0};
  EXPECT_ERROR_CONTAINS(kv_cache_append(cache, cache, fresh, fresh, lengths, short_host),
                        "kv_cache_append: host_lengths.size()");
  const DType other = impl.dtype == DType::f32 ? DType::f64 : DType::f32;
  EXPECT_ERROR_CONTAINS(kv_cache_append(cache, cache, test::make_poisoned({2, 1, 2, 4}, other, impl.device), fresh,
                                        lengths, host),
                        "kv_cache_append: k_new.dtype");
  Tensor strided = Tensor::view(cache.data(), impl.dtype, impl.device, {2, 4, 2, 4}, {64, 16, 4, 1});
  EXPECT_ERROR_CONTAINS(kv_cache_append(strided, strided, fresh, fresh, lengths, host),
                        "kv_cache_append: k_cache.strides");
  if (impl.device.is_cuda()) {
    EXPECT_ERROR_CONTAINS(kv_cache_append(cache, cache, fresh, fresh, lengths.to(Device::cpu()), host),
                          "kv_cache_append: lengths.device");
  } else {
    // On the CPU the two copies of the lengths are compared.
    std::vector<std::int64_t> stale = {0, 1};
    EXPECT_ERROR_CONTAINS(kv_cache_append(cache, cache, fresh, fresh, lengths, stale), "kv_cache_append: lengths[1]");
  }
  EXPECT_EQ(host, (std::vector<std::int64_t>{0, 0})) << "a rejected call must not advance the lengths";
}

TEST(KvCacheOp, RejectsUnsupportedDtype) {
  EXPECT_FALSE(kv_cache_supported(Device::cpu(), DType::i32));
  Tensor cache = test::make_poisoned({1, 4, 1, 1}, DType::i32, Device::cpu());
  Tensor fresh = test::make_poisoned({1, 1, 1, 1}, DType::i32, Device::cpu());
  Tensor lengths = test::make_tensor({0}, {1}, DType::i32, Device::cpu());
  std::vector<std::int64_t> host = {0};
  EXPECT_ERROR_CONTAINS(kv_cache_append(cache, cache, fresh, fresh, lengths, host), "kv_cache_append: dtype on cpu");
}

INSTANTIATE_TEST_SUITE_P(Impls, KvCacheOp, testing::ValuesIn(test::all_impls()), test::impl_param_name);

}  // namespace
}  // namespace ignis
