// rope_qkv_append (CUDA, f32/f16/bf16 caches) against the fp64 reference: both rope styles, a
// partial rotary dim, positions far into the cache, decode (one block, which advances the length
// itself) and prefill (many blocks, then the advance kernel) followed by a decode step on the
// same cache, rows past max_seqlen dropped when the device length runs ahead, the host's
// "context length exceeded" check, and bad arguments.
#include <gtest/gtest.h>

#include <random>

#include "harness/op_harness.h"
#include "ignis/ops.h"
#include "model/error_text.h"
#include "ref/rope_append.h"

namespace ignis {
namespace {

using test::Impl;

class RopeAppendOp : public testing::TestWithParam<Impl> {};

struct Case {
  ref::RopeAppendDims dims;  // dims.tokens: the first append
  std::int64_t length;       // the cache's length before it
  double attention_factor;
};

struct State {
  Tensor k, v, lengths, inv_freq;
  std::vector<std::int64_t> host_lengths;
  ref::KvCacheState expected;
  std::vector<double> inv_freq_values;
};

State make_state(const Impl& impl, const ref::RopeAppendDims& d, std::int64_t length, std::mt19937_64& rng) {
  State st;
  const Shape shape{1, d.max_seqlen, d.heads_kv, d.head_dim};
  const std::int64_t n = d.max_seqlen * d.heads_kv * d.head_dim;
  st.expected.k = test::quantize(test::random_normal(rng, n), impl.dtype);
  st.expected.v = test::quantize(test::random_normal(rng, n), impl.dtype);
  st.expected.lengths = {length};
  st.k = test::make_tensor(st.expected.k, shape, impl.dtype, impl.device);
  st.v = test::make_tensor(st.expected.v, shape, impl.dtype, impl.device);
  st.lengths = test::make_tensor({static_cast<double>(length)}, {1}, DType::i32, impl.device);
  st.host_lengths = {length};
  const std::vector<float> inv_freq = rope_inv_freq(d.rotary_dim, 10000.0);
  st.inv_freq_values.assign(inv_freq.begin(), inv_freq.end());
  st.inv_freq = test::make_tensor(st.inv_freq_values, {d.rotary_dim / 2}, DType::f32, impl.device);
  return st;
}

RopeAppendArgs args_of(const ref::RopeAppendDims& d, double attention_factor) {
  RopeAppendArgs a;
  a.rotary_dim = d.rotary_dim;
  a.style = d.interleaved ? RopeStyle::interleaved : RopeStyle::rotate_half;
  a.attention_factor = static_cast<float>(attention_factor);
  return a;
}

// Appends `tokens` random tokens to the op's cache and to the expected state, then compares q,
// both caches and both lengths.
void append_and_check(const Impl& impl, ref::RopeAppendDims d, double factor, State& st, std::int64_t tokens,
                      std::mt19937_64& rng) {
  d.tokens = tokens;
  factor = static_cast<float>(factor);  // the kernel's value
  SCOPED_TRACE(testing::Message() << impl << " heads " << d.heads_q << "/" << d.heads_kv << " head_dim " << d.head_dim
                                  << " rotary_dim " << d.rotary_dim << (d.interleaved ? " interleaved" : " half")
                                  << " tokens " << tokens << " at " << st.host_lengths[0] << " of " << d.max_seqlen);
  const std::int64_t width = (d.heads_q + 2 * d.heads_kv) * d.head_dim;
  const auto qkv = test::quantize(test::random_normal(rng, tokens * width), DType::f32);
  Tensor q = test::make_poisoned({tokens, d.heads_q, d.head_dim}, impl.dtype, impl.device);
  rope_qkv_append(test::make_tensor(qkv, {tokens, width}, DType::f32, impl.device), st.inv_freq, args_of(d, factor),
                  q, st.k, st.v, st.lengths, st.host_lengths);
  const auto ref = ref::rope_qkv_append(qkv, st.inv_freq_values, st.expected.k, st.expected.v,
                                        st.expected.lengths[0], d, factor);
  st.expected = ref.cache;
  st.expected.v = test::quantize(st.expected.v, impl.dtype);  // v is copied: rounded once to the cache dtype
  // One rounding to the cache dtype after an fp32 rotation: the naive result is the rounded reference.
  EXPECT_TRUE(test::close_to_reference(test::read_tensor(q), ref.q, impl.dtype, test::quantize(ref.q, impl.dtype)))
      << "q";
  EXPECT_TRUE(test::close_to_reference(test::read_tensor(st.k), st.expected.k, impl.dtype,
                                       test::quantize(st.expected.k, impl.dtype)))
      << "k cache";
  EXPECT_EQ(test::read_tensor(st.v), st.expected.v) << "v cache";
  EXPECT_EQ(st.host_lengths, st.expected.lengths);
  EXPECT_EQ(test::read_tensor(st.lengths), (std::vector<double>{static_cast<double>(st.expected.lengths[0])}));
}

TEST_P(RopeAppendOp, PrefillThenDecode) {
  const Impl impl = GetParam();
  IGNIS_SKIP_UNLESS(impl, rope_qkv_append_supported(impl.device, impl.dtype));
  // dims: tokens, heads_q, heads_kv, head_dim, max_seqlen, rotary_dim, interleaved.
  const std::vector<Case> cases = {
      {{1, 9, 3, 64, 8, 64, false}, 0, 1.0},        // SmolLM2 decode: one block
      {{37, 9, 3, 64, 64, 64, true}, 5, 1.0},       // 21312 work items: many blocks + advance kernel
      {{37, 4, 2, 16, 50, 8, false}, 3, 1.3},       // partial rotary dim, one block, attention factor
      {{1, 4, 2, 16, 1001, 8, true}, 999, 1.0},     // far into the cache; the decode fills the last row
      {{1024, 2, 1, 64, 1100, 32, false}, 17, 1.0},  // a long prefill
      {{5, 3, 1, 6, 7, 2, true}, 0, 1.0},           // head_dim 6: odd pair counts
  };
  std::uint64_t salt = 9700;
  for (const Case& tc : cases) {
    auto rng = test::case_rng(++salt);
    State st = make_state(impl, tc.dims, tc.length, rng);
    append_and_check(impl, tc.dims, tc.attention_factor, st, tc.dims.tokens, rng);
    if (st.host_lengths[0] < tc.dims.max_seqlen) append_and_check(impl, tc.dims, tc.attention_factor, st, 1, rng);
  }
}

// A device length ahead of the host's (which only a caller bypassing the API could cause):
// rows that would land past max_seqlen are dropped, q is still written, the length advances.
TEST_P(RopeAppendOp, DropsRowsPastTheCache) {
  const Impl impl = GetParam();
  IGNIS_SKIP_UNLESS(impl, rope_qkv_append_supported(impl.device, impl.dtype));
  for (std::int64_t tokens : {3, 300}) {
    SCOPED_TRACE(testing::Message() << impl << " tokens " << tokens);
    auto rng = test::case_rng(9800 + static_cast<std::uint64_t>(tokens));
    // 32 work items per token: 300 tokens take the many-block kernel.
    const ref::RopeAppendDims d{tokens, 2, 2, 8, tokens + 5, 8, false};
    State st = make_state(impl, d, 0, rng);
    const std::int64_t device_length = d.max_seqlen - 1;
    st.lengths = test::make_tensor({static_cast<double>(device_length)}, {1}, DType::i32, impl.device);
    std::vector<std::int64_t> host = {0};
    const std::int64_t width = (d.heads_q + 2 * d.heads_kv) * d.head_dim;
    // The expected state: the reference on a cache tall enough for every row, cut back.
    ref::RopeAppendDims tall = d;
    tall.max_seqlen = device_length + tokens;
    const auto qkv = test::quantize(test::random_normal(rng, tokens * width), DType::f32);
    Tensor q = test::make_poisoned({tokens, d.heads_q, d.head_dim}, impl.dtype, impl.device);
    const std::int64_t row = d.heads_kv * d.head_dim;
    rope_qkv_append(test::make_tensor(qkv, {tokens, width}, DType::f32, impl.device), st.inv_freq, args_of(d, 1.0),
                    q, st.k, st.v, st.lengths, host);
    std::vector<double> k_tall = st.expected.k, v_tall = st.expected.v;
    k_tall.resize(static_cast<std::size_t>(tall.max_seqlen * row), 0.0);
    v_tall.resize(k_tall.size(), 0.0);
    const auto ref = ref::rope_qkv_append(qkv, st.inv_freq_values, k_tall, v_tall, device_length, tall, 1.0);
    const std::vector<double> k_expected(ref.cache.k.begin(), ref.cache.k.begin() + d.max_seqlen * row);
    const std::vector<double> v_expected =
        test::quantize({ref.cache.v.begin(), ref.cache.v.begin() + d.max_seqlen * row}, impl.dtype);
    EXPECT_TRUE(test::close_to_reference(test::read_tensor(q), ref.q, impl.dtype, test::quantize(ref.q, impl.dtype)));
    EXPECT_TRUE(test::close_to_reference(test::read_tensor(st.k), k_expected, impl.dtype,
                                         test::quantize(k_expected, impl.dtype)));
    EXPECT_EQ(test::read_tensor(st.v), v_expected);
    EXPECT_EQ(test::read_tensor(st.lengths), (std::vector<double>{static_cast<double>(device_length + tokens)}));
    EXPECT_EQ(host, (std::vector<std::int64_t>{tokens}));
  }
}

TEST_P(RopeAppendOp, ContextLengthExceededWritesNothing) {
  const Impl impl = GetParam();
  IGNIS_SKIP_UNLESS(impl, rope_qkv_append_supported(impl.device, impl.dtype));
  auto rng = test::case_rng(9900);
  const ref::RopeAppendDims d{3, 2, 1, 4, 8, 4, false};
  State st = make_state(impl, d, 6, rng);
  const std::int64_t width = (d.heads_q + 2 * d.heads_kv) * d.head_dim;
  Tensor qkv = test::make_tensor(test::random_normal(rng, 3 * width), {3, width}, DType::f32, impl.device);
  Tensor q = test::make_poisoned({3, d.heads_q, d.head_dim}, impl.dtype, impl.device);
  try {
    rope_qkv_append(qkv, st.inv_freq, args_of(d, 1.0), q, st.k, st.v, st.lengths, st.host_lengths);
    FAIL() << "appending past max_seqlen must throw";
  } catch (const Error& e) {
    EXPECT_STREQ(e.what(),
                 "rope_qkv_append: context length exceeded: sequence 0 length + new_tokens: expected <= max_seqlen "
                 "8, got 6 + 3");
  }
  EXPECT_EQ(st.host_lengths, (std::vector<std::int64_t>{6}));
  EXPECT_EQ(test::read_tensor(st.lengths), (std::vector<double>{6}));
  EXPECT_EQ(test::read_tensor(st.k), st.expected.k);
  EXPECT_EQ(test::read_tensor(st.v), st.expected.v);
}

TEST_P(RopeAppendOp, RejectsBadArguments) {
  const Impl impl = GetParam();
  IGNIS_SKIP_UNLESS(impl, rope_qkv_append_supported(impl.device, impl.dtype));
  const Device dev = impl.device;
  auto make = [&](const Shape& shape, DType dtype) { return test::make_poisoned(shape, dtype, dev); };
  // heads_q 2, heads_kv 1, head_dim 4, max_seqlen 8, one token.
  Tensor qkv = make({1, 16}, DType::f32), inv_freq = test::make_tensor({1.0, 0.5}, {2}, DType::f32, dev);
  Tensor q = make({1, 2, 4}, impl.dtype), cache = make({1, 8, 1, 4}, impl.dtype);
  Tensor lengths = test::make_tensor({0}, {1}, DType::i32, dev);
  std::vector<std::int64_t> host = {0};
  RopeAppendArgs args;
  args.rotary_dim = 4;
  auto call = [&](const Tensor& qkv_, const Tensor& inv_, const RopeAppendArgs& a, const Tensor& q_,
                  const Tensor& kc, const Tensor& vc, const Tensor& len) {
    rope_qkv_append(qkv_, inv_, a, q_, kc, vc, len, host);
  };
  EXPECT_ERROR_CONTAINS(call(make({1, 15}, DType::f32), inv_freq, args, q, cache, cache, lengths),
                        "rope_qkv_append: qkv.shape");
  EXPECT_ERROR_CONTAINS(call(make({2, 16}, DType::f32), inv_freq, args, q, cache, cache, lengths),
                        "rope_qkv_append: q_out.shape");
  EXPECT_ERROR_CONTAINS(call(make({1, 16}, DType::bf16), inv_freq, args, q, cache, cache, lengths),
                        "rope_qkv_append: qkv.dtype");
  EXPECT_ERROR_CONTAINS(call(qkv, make({3}, DType::f32), args, q, cache, cache, lengths),
                        "rope_qkv_append: inv_freq.shape");
  EXPECT_ERROR_CONTAINS(call(qkv, make({2}, DType::bf16), args, q, cache, cache, lengths),
                        "rope_qkv_append: inv_freq.dtype");
  RopeAppendArgs odd = args;
  odd.rotary_dim = 3;
  EXPECT_ERROR_CONTAINS(call(qkv, inv_freq, odd, q, cache, cache, lengths), "rope_qkv_append: args.rotary_dim");
  RopeAppendArgs wide = args;
  wide.rotary_dim = 6;
  EXPECT_ERROR_CONTAINS(call(qkv, make({3}, DType::f32), wide, q, cache, cache, lengths),
                        "rope_qkv_append: args.rotary_dim");
  EXPECT_ERROR_CONTAINS(call(qkv, inv_freq, args, make({1, 2, 5}, impl.dtype), cache, cache, lengths),
                        "rope_qkv_append: q_out.shape");
  EXPECT_ERROR_CONTAINS(call(qkv, inv_freq, args, make({1, 3, 4}, impl.dtype), cache, cache, lengths),
                        "rope_qkv_append: qkv.shape");
  const DType other = impl.dtype == DType::f32 ? DType::bf16 : DType::f32;
  EXPECT_ERROR_CONTAINS(call(qkv, inv_freq, args, make({1, 2, 4}, other), cache, cache, lengths),
                        "rope_qkv_append: q_out.dtype");
  EXPECT_ERROR_CONTAINS(call(qkv, inv_freq, args, q, cache, make({1, 8, 1, 4}, other), lengths),
                        "rope_qkv_append: v_cache.dtype");
  EXPECT_ERROR_CONTAINS(call(qkv, inv_freq, args, q, cache, make({1, 9, 1, 4}, impl.dtype), lengths),
                        "rope_qkv_append: v_cache.shape");
  Tensor batch2 = make({2, 8, 1, 4}, impl.dtype);
  EXPECT_ERROR_CONTAINS(call(qkv, inv_freq, args, q, batch2, batch2, lengths),
                        "rope_qkv_append: k_cache.size(0) (batch)");
  EXPECT_ERROR_CONTAINS(call(qkv, inv_freq, args, q, cache, cache, test::make_tensor({0}, {1}, DType::i64, dev)),
                        "rope_qkv_append: lengths.dtype");
  EXPECT_ERROR_CONTAINS(call(qkv, inv_freq, args, q, cache, cache, test::make_tensor({0, 0}, {2}, DType::i32, dev)),
                        "rope_qkv_append: lengths.shape");
  EXPECT_ERROR_CONTAINS(call(qkv, inv_freq, args, q, cache, cache, lengths.to(Device::cpu())),
                        "rope_qkv_append: lengths.device");
  EXPECT_ERROR_CONTAINS(call(qkv.to(Device::cpu()), inv_freq, args, q, cache, cache, lengths),
                        "rope_qkv_append: qkv.device");
  Tensor strided = Tensor::view(cache.data(), impl.dtype, dev, {1, 4, 1, 4}, {32, 8, 4, 1});
  EXPECT_ERROR_CONTAINS(call(qkv, inv_freq, args, q, strided, strided, lengths), "rope_qkv_append: k_cache.strides");
  std::vector<std::int64_t> two = {0, 0};
  EXPECT_ERROR_CONTAINS(rope_qkv_append(qkv, inv_freq, args, q, cache, cache, lengths, two),
                        "rope_qkv_append: host_lengths.size()");
  EXPECT_EQ(host, (std::vector<std::int64_t>{0})) << "a rejected call must not advance the length";
  EXPECT_EQ(test::read_tensor(lengths), (std::vector<double>{0}));
}

TEST(RopeAppendOp, NotOnTheCpu) {
  EXPECT_FALSE(rope_qkv_append_supported(Device::cpu(), DType::f32));
  EXPECT_FALSE(rope_qkv_append_supported(Device::cuda(), DType::f64));
  Tensor qkv = test::make_poisoned({1, 12}, DType::f32, Device::cpu());
  Tensor inv_freq = test::make_tensor({1.0}, {1}, DType::f32, Device::cpu());
  Tensor q = test::make_poisoned({1, 1, 4}, DType::f32, Device::cpu());
  Tensor cache = test::make_poisoned({1, 4, 1, 4}, DType::f32, Device::cpu());
  Tensor lengths = test::make_tensor({0}, {1}, DType::i32, Device::cpu());
  std::vector<std::int64_t> host = {0};
  RopeAppendArgs args;
  args.rotary_dim = 2;
  EXPECT_ERROR_CONTAINS(rope_qkv_append(qkv, inv_freq, args, q, cache, cache, lengths, host),
                        "rope_qkv_append: k_cache.dtype on cpu");
  EXPECT_EQ(host, (std::vector<std::int64_t>{0}));
}

INSTANTIATE_TEST_SUITE_P(Impls, RopeAppendOp, testing::ValuesIn(test::all_impls()), test::impl_param_name);

}  // namespace
}  // namespace ignis
