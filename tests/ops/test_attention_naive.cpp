// The naive attention kernel (CUDA f32/f64, CPU f32) against the fp64 reference: odd sequence lengths,
// head dims up to 256, GQA, causal/window/softcap masks with seqlen_q != seqlen_k, a row longer
// than any shared-memory tile, poisoned outputs, and bad arguments.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <limits>

#include "harness/op_harness.h"
#include "ignis/ops.h"
#include "model/error_text.h"
#include "ops/attention_case.h"
#include "ref/attention.h"

namespace ignis {
namespace {

using test::Impl;

using Case = test::AttentionCase;
using test::shaped;
using test::to_ref;

struct Outputs {
  std::vector<double> o, lse;
};

Outputs run_case(const Impl& impl, const Case& c, std::uint64_t salt, double f32_rtol = 2e-6) {
  SCOPED_TRACE(testing::Message() << impl << " " << c);
  const auto p = to_ref(c);
  const Shape q_shape{p.batch, p.seqlen_q, p.heads_q, p.head_dim};
  const Shape lse_shape{p.batch, p.heads_q, p.seqlen_q};
  auto rng = test::case_rng(salt);
  const test::AttentionInputs in = test::random_attention_inputs(p, impl.dtype, impl.device, rng);
  Tensor to = test::make_poisoned(q_shape, impl.dtype, impl.device);
  Tensor tlse = test::make_poisoned(lse_shape, attention_lse_dtype(impl.dtype), impl.device);
  attention_naive_forward(in.tq, in.tk, in.tv, to, tlse, c.params);
  const auto ref = ref::attention_forward(in.q, in.k, in.v, p);
  Outputs got{test::read_tensor(to), test::read_tensor(tlse)};
  EXPECT_TRUE(test::close_to_reference(got.o, ref.o, impl.dtype, {}, f32_rtol)) << "o";
  EXPECT_TRUE(test::close_to_reference(got.lse, ref.lse, attention_lse_dtype(impl.dtype), {}, f32_rtol)) << "lse";
  return got;
}

class AttentionNaiveOp : public testing::TestWithParam<Impl> {};

TEST_P(AttentionNaiveOp, OddSequenceLengths) {
  const Impl impl = GetParam();
  IGNIS_SKIP_UNLESS(impl, attention_naive_supported(impl.device, impl.dtype));
  const std::int64_t head_dims[] = {16, 64, 80, 128, 256};
  std::uint64_t n = 0;
  for (std::int64_t seqlen_q : test::kOddSizes)
    for (std::int64_t seqlen_k : test::kOddSizes) {
      Case c;
      c.seqlen_q = seqlen_q;
      c.seqlen_k = seqlen_k;
      c.head_dim = head_dims[n % 5];
      c.ratio = n % 2 == 0 ? 1 : 3;
      c.heads_kv = 1 + (n / 2) % 2;
      c.batch = 1 + (n / 3) % 2;
      switch (n % 4) {
        case 0: break;
        case 1: c.params.causal = true; break;
        case 2: {
          c.params.window_left = 7;
          c.params.window_right = 3;
          break;
        }
        case 3: {
          c.params.causal = true;
          c.params.softcap = 1.5;
          break;
        }
      }
      if (seqlen_q * seqlen_k > 100000) {  // keep the reference and compute-sanitizer runs short
        c.batch = c.heads_kv = c.ratio = 1;
        c.head_dim = std::min<std::int64_t>(c.head_dim, 80);
      }
      run_case(impl, c, 100 + ++n);
    }
}

TEST_P(AttentionNaiveOp, MasksWithUnequalLengths) {
  const Impl impl = GetParam();
  IGNIS_SKIP_UNLESS(impl, attention_naive_supported(impl.device, impl.dtype));
  struct Mask {
    std::int64_t seqlen_q, seqlen_k;
    bool causal;
    std::int64_t left, right;
  };
  const Mask masks[] = {
      {17, 300, true, -1, -1},  // short q: every row sees more than one chunk of keys
      {300, 17, true, -1, -1},  // long q: the first 283 rows see nothing
      {300, 300, false, 5, 0},  {5, 3, false, 0, 0},   {113, 200, false, -1, 2},
      {400, 400, true, 130, -1}, {200, 113, false, 40, 40},
  };
  std::uint64_t salt = 200;
  for (const Mask& m : masks) {
    const AttentionParams params{.causal = m.causal, .window_left = m.left, .window_right = m.right};
    run_case(impl, shaped(1, 2, 2, m.seqlen_q, m.seqlen_k, 64, params), ++salt);
  }
}

TEST_P(AttentionNaiveOp, ScaleAndSoftcap) {
  const Impl impl = GetParam();
  IGNIS_SKIP_UNLESS(impl, attention_naive_supported(impl.device, impl.dtype));
  // Scale 0 is the default 1 / sqrt(head_dim). Scale 1 (scores with stddev ~9) only with a softcap:
  // uncapped scores that large are beyond what f32 attention holds to 2e-6.
  const AttentionParams options[] = {
      {.scale = 0.0},
      {.scale = 0.3},
      {.scale = 0.0, .softcap = 0.5},
      {.scale = 0.3, .causal = true, .softcap = 4.0},
      {.scale = 1.0, .softcap = 0.5},
      {.scale = 1.0, .causal = true, .softcap = 4.0},
  };
  std::uint64_t salt = 300;
  for (const AttentionParams& params : options) run_case(impl, shaped(2, 1, 3, 33, 150, 80, params), ++salt);
}

TEST_P(AttentionNaiveOp, LongRows) {
  const Impl impl = GetParam();
  IGNIS_SKIP_UNLESS(impl, attention_naive_supported(impl.device, impl.dtype));
  run_case(impl, shaped(1, 1, 2, 2, 20000, 64), 400);
  const AttentionParams params{.causal = true, .window_left = 15000, .softcap = 2.0};
  run_case(impl, shaped(1, 1, 2, 3, 20000, 128, params), 401);
}

TEST_P(AttentionNaiveOp, FullyMaskedRowsAreZero) {
  const Impl impl = GetParam();
  IGNIS_SKIP_UNLESS(impl, attention_naive_supported(impl.device, impl.dtype));
  const Case c = shaped(2, 2, 1, 40, 10, 80, {.causal = true});
  const Outputs got = run_case(impl, c, 500);
  const std::int64_t heads = 2, masked_rows = 30, D = 80;
  for (std::int64_t b = 0; b < c.batch; ++b)
    for (std::int64_t h = 0; h < heads; ++h)
      for (std::int64_t i = 0; i < masked_rows; ++i) {
        EXPECT_EQ(got.lse[(b * heads + h) * c.seqlen_q + i], -std::numeric_limits<double>::infinity());
        for (std::int64_t d = 0; d < D; ++d) ASSERT_EQ(got.o[((b * c.seqlen_q + i) * heads + h) * D + d], 0.0);
      }
}

// Tensors of a valid call: q [2, 5, 4, 16], k and v [2, 7, 2, 16].
struct ValidCall {
  Tensor q, k, v, o, lse;
  ValidCall(const Impl& impl, std::int64_t head_dim = 16)
      : q(test::make_poisoned({2, 5, 4, head_dim}, impl.dtype, impl.device)),
        k(test::make_poisoned({2, 7, 2, head_dim}, impl.dtype, impl.device)),
        v(test::make_poisoned({2, 7, 2, head_dim}, impl.dtype, impl.device)),
        o(test::make_poisoned({2, 5, 4, head_dim}, impl.dtype, impl.device)),
        lse(test::make_poisoned({2, 4, 5}, attention_lse_dtype(impl.dtype), impl.device)) {}
};

TEST_P(AttentionNaiveOp, RejectsBadArguments) {
  const Impl impl = GetParam();
  IGNIS_SKIP_UNLESS(impl, attention_naive_supported(impl.device, impl.dtype));
  ValidCall t(impl);
  const AttentionParams none;
  auto make = [&](const Shape& shape) { return test::make_poisoned(shape, impl.dtype, impl.device); };
  auto make_as = [&](const Shape& shape, DType dtype) { return test::make_poisoned(shape, dtype, impl.device); };
  const DType other = impl.dtype == DType::f32 ? DType::f64 : DType::f32;
  EXPECT_NO_THROW(attention_naive_forward(t.q, t.k, t.v, t.o, t.lse, none));

  EXPECT_ERROR_CONTAINS(attention_naive_forward(t.q, make({1, 7, 2, 16}), t.v, t.o, t.lse, none),
                        "attention_naive_forward: k.shape");
  EXPECT_ERROR_CONTAINS(attention_naive_forward(t.q, t.k, make({2, 6, 2, 16}), t.o, t.lse, none),
                        "attention_naive_forward: v.shape");
  EXPECT_ERROR_CONTAINS(attention_naive_forward(t.q, make({2, 7, 2, 8}), make({2, 7, 2, 8}), t.o, t.lse, none),
                        "attention_naive_forward: k.shape");
  EXPECT_ERROR_CONTAINS(attention_naive_forward(t.q, t.k, t.v, make({2, 5, 4, 8}), t.lse, none),
                        "attention_naive_forward: o.shape");
  EXPECT_ERROR_CONTAINS(attention_naive_forward(t.q, t.k, t.v, t.o, make_as({2, 5, 4}, attention_lse_dtype(impl.dtype)),
                                                none),
                        "attention_naive_forward: lse.shape");
  EXPECT_ERROR_CONTAINS(attention_naive_forward(make({2, 5, 64}), t.k, t.v, t.o, t.lse, none),
                        "attention_naive_forward: q.dim");
  EXPECT_ERROR_CONTAINS(attention_naive_forward(t.q, make({2, 7, 0, 16}), make({2, 7, 0, 16}), t.o, t.lse, none),
                        "attention_naive_forward: k.size(2) (heads_kv)");
  EXPECT_ERROR_CONTAINS(attention_naive_forward(t.q, make({2, 0, 2, 16}), make({2, 0, 2, 16}), t.o, t.lse, none),
                        "attention_naive_forward: k.size(1) (seqlen_k)");
  try {
    attention_naive_forward(t.q, make({2, 7, 3, 16}), make({2, 7, 3, 16}), t.o, t.lse, none);
    ADD_FAILURE() << "heads_q % heads_kv != 0 was accepted";
  } catch (const Error& e) {
    EXPECT_STREQ(e.what(), "attention_naive_forward: q.size(2) (heads_q): expected a multiple of heads_kv (3), got 4");
  }

  EXPECT_ERROR_CONTAINS(attention_naive_forward(t.q, make_as({2, 7, 2, 16}, other), t.v, t.o, t.lse, none),
                        "attention_naive_forward: k.dtype");
  EXPECT_ERROR_CONTAINS(attention_naive_forward(t.q, t.k, t.v, make_as({2, 5, 4, 16}, other), t.lse, none),
                        "attention_naive_forward: o.dtype");
  EXPECT_ERROR_CONTAINS(attention_naive_forward(t.q, t.k, t.v, t.o, make_as({2, 4, 5}, DType::f16), none),
                        "attention_naive_forward: lse.dtype");
  Tensor half_q = make_as({2, 5, 4, 16}, DType::f16), half_kv = make_as({2, 7, 2, 16}, DType::f16);
  Tensor f32_lse = make_as({2, 4, 5}, DType::f32);
  EXPECT_ERROR_CONTAINS(attention_naive_forward(half_q, half_kv, half_kv, half_q, f32_lse, none),
                        "attention_naive_forward: q.dtype");

  if (impl.device.is_cuda()) {
    Tensor host_k = test::make_poisoned({2, 7, 2, 16}, impl.dtype, Device::cpu());
    EXPECT_ERROR_CONTAINS(attention_naive_forward(t.q, host_k, t.v, t.o, t.lse, none),
                          "attention_naive_forward: k.device");
  }

  ValidCall wide(impl, 32);
  const Shape strides = contiguous_strides({2, 5, 4, 32});
  Tensor strided_q = Tensor::view(wide.q.data(), impl.dtype, impl.device, {2, 5, 4, 16}, strides);
  Tensor strided_o = Tensor::view(wide.o.data(), impl.dtype, impl.device, {2, 5, 4, 16}, strides);
  EXPECT_ERROR_CONTAINS(attention_naive_forward(strided_q, t.k, t.v, t.o, t.lse, none),
                        "attention_naive_forward: q.strides");
  EXPECT_ERROR_CONTAINS(attention_naive_forward(t.q, t.k, t.v, strided_o, t.lse, none),
                        "attention_naive_forward: o.strides");

  ValidCall too_wide(impl, kAttentionNaiveMaxHeadDim + 1);
  try {
    attention_naive_forward(too_wide.q, too_wide.k, too_wide.v, too_wide.o, too_wide.lse, none);
    ADD_FAILURE() << "head_dim 257 was accepted";
  } catch (const Error& e) {
    EXPECT_STREQ(e.what(), "attention_naive_forward: q.size(3) (head_dim): expected <= 256, got 257");
  }

  AttentionParams bad = none;
  bad.window_left = -2;
  EXPECT_ERROR_CONTAINS(attention_naive_forward(t.q, t.k, t.v, t.o, t.lse, bad),
                        "attention_naive_forward: params.window_left");
  bad = none;
  bad.softcap = -1.0;
  EXPECT_ERROR_CONTAINS(attention_naive_forward(t.q, t.k, t.v, t.o, t.lse, bad),
                        "attention_naive_forward: params.softcap");
  bad = none;
  bad.scale = std::numeric_limits<double>::quiet_NaN();
  EXPECT_ERROR_CONTAINS(attention_naive_forward(t.q, t.k, t.v, t.o, t.lse, bad),
                        "attention_naive_forward: params.scale");
}

// The cached entry point against the reference run on each sequence's first seqlens_k[b] rows:
// rows past a length hold poison-sized values that would show if they were read.
TEST_P(AttentionNaiveOp, KvCacheWithDeviceLengths) {
  const Impl impl = GetParam();
  IGNIS_SKIP_UNLESS(impl, attention_naive_supported(impl.device, impl.dtype));
  const std::int64_t batch = 3, heads_kv = 2, ratio = 3, heads_q = heads_kv * ratio, head_dim = 64, capacity = 37;
  std::uint64_t salt = 900;
  for (std::int64_t seqlen_q : {1, 3}) {
    const std::vector<std::int32_t> lengths = {static_cast<std::int32_t>(seqlen_q), 17, 37};
    auto rng = test::case_rng(++salt);
    const Shape q_shape{batch, seqlen_q, heads_q, head_dim}, cache_shape{batch, capacity, heads_kv, head_dim};
    const auto q = test::quantize(
        test::random_normal(rng, static_cast<std::size_t>(batch * seqlen_q * heads_q * head_dim)), impl.dtype);
    const auto cache_count = static_cast<std::size_t>(batch * capacity * heads_kv * head_dim);
    auto k = test::quantize(test::random_normal(rng, cache_count), impl.dtype);
    auto v = test::quantize(test::random_normal(rng, cache_count), impl.dtype);
    const std::size_t row = static_cast<std::size_t>(heads_kv * head_dim);
    for (std::int64_t b = 0; b < batch; ++b)
      for (std::int64_t t = lengths[static_cast<std::size_t>(b)]; t < capacity; ++t)
        for (std::size_t e = 0; e < row; ++e) {
          k[static_cast<std::size_t>(b * capacity + t) * row + e] = 1e4;
          v[static_cast<std::size_t>(b * capacity + t) * row + e] = 1e4;
        }
    Tensor tq = test::make_tensor(q, q_shape, impl.dtype, impl.device);
    Tensor tk = test::make_tensor(k, cache_shape, impl.dtype, impl.device);
    Tensor tv = test::make_tensor(v, cache_shape, impl.dtype, impl.device);
    std::vector<std::int32_t> host_lengths = lengths;
    Tensor tlen = Tensor::view(host_lengths.data(), DType::i32, Device::cpu(), {batch}).to(impl.device);
    Tensor to = test::make_poisoned(q_shape, impl.dtype, impl.device);
    Tensor tlse = test::make_poisoned({batch, heads_q, seqlen_q}, attention_lse_dtype(impl.dtype), impl.device);
    AttentionParams params;
    params.causal = true;
    attention_naive_kvcache_forward(tq, tk, tv, tlen, to, tlse, params);
    const auto got_o = test::read_tensor(to);
    const auto got_lse = test::read_tensor(tlse);
    // Without lse the output is the same.
    Tensor to2 = test::make_poisoned(q_shape, impl.dtype, impl.device);
    attention_naive_kvcache_forward(tq, tk, tv, tlen, to2, Tensor(), params);
    EXPECT_EQ(test::read_tensor(to2), got_o);
    for (std::int64_t b = 0; b < batch; ++b) {
      SCOPED_TRACE(testing::Message() << impl << " seqlen_q " << seqlen_q << " sequence " << b);
      const std::int64_t len = lengths[static_cast<std::size_t>(b)];
      const std::size_t q_size = static_cast<std::size_t>(seqlen_q * heads_q * head_dim);
      const std::size_t lse_size = static_cast<std::size_t>(heads_q * seqlen_q);
      const auto q_b = std::vector<double>(q.begin() + static_cast<std::ptrdiff_t>(b * q_size),
                                           q.begin() + static_cast<std::ptrdiff_t>((b + 1) * q_size));
      const auto k0 = k.begin() + static_cast<std::ptrdiff_t>(static_cast<std::size_t>(b * capacity) * row);
      const auto v0 = v.begin() + static_cast<std::ptrdiff_t>(static_cast<std::size_t>(b * capacity) * row);
      const std::vector<double> k_b(k0, k0 + static_cast<std::ptrdiff_t>(static_cast<std::size_t>(len) * row));
      const std::vector<double> v_b(v0, v0 + static_cast<std::ptrdiff_t>(static_cast<std::size_t>(len) * row));
      const auto ref =
          ref::attention_forward(q_b, k_b, v_b, to_ref(shaped(1, heads_kv, ratio, seqlen_q, len, head_dim, params)));
      const std::vector<double> o_b(got_o.begin() + static_cast<std::ptrdiff_t>(b * q_size),
                                    got_o.begin() + static_cast<std::ptrdiff_t>((b + 1) * q_size));
      const std::vector<double> lse_b(got_lse.begin() + static_cast<std::ptrdiff_t>(b * lse_size),
                                      got_lse.begin() + static_cast<std::ptrdiff_t>((b + 1) * lse_size));
      EXPECT_TRUE(test::close_to_reference(o_b, ref.o, impl.dtype, {}, 2e-6)) << "o";
      EXPECT_TRUE(test::close_to_reference(lse_b, ref.lse, attention_lse_dtype(impl.dtype), {}, 2e-6)) << "lse";
    }
    // Bad lengths tensors: wrong dtype, shape, device.
    Tensor f32_len = test::make_poisoned({batch}, DType::f32, impl.device);
    EXPECT_ERROR_CONTAINS(attention_naive_kvcache_forward(tq, tk, tv, f32_len, to, Tensor(), params),
                          "attention_naive_forward: seqlens_k.dtype");
    EXPECT_ERROR_CONTAINS(attention_naive_kvcache_forward(tq, tk, tv, tlen.reshape({1, batch}), to, Tensor(), params),
                          "attention_naive_forward: seqlens_k.dim");
    if (impl.device.is_cuda()) {
      Tensor host_len = Tensor::view(host_lengths.data(), DType::i32, Device::cpu(), {batch});
      EXPECT_ERROR_CONTAINS(attention_naive_kvcache_forward(tq, tk, tv, host_len, to, Tensor(), params),
                            "attention_naive_forward: seqlens_k.device");
    }
  }
}

// The CPU path takes f32 only; a CUDA-only dtype names the device's choice.
TEST(AttentionNaiveOp, CpuTakesF32Only) {
  EXPECT_TRUE(attention_naive_supported(Device::cpu(), DType::f32));
  EXPECT_FALSE(attention_naive_supported(Device::cpu(), DType::f64));
  EXPECT_FALSE(attention_naive_supported(Device::cuda(0), DType::bf16));
  const Impl cpu{Device::cpu(), DType::f64};
  ValidCall t(cpu);
  try {
    attention_naive_forward(t.q, t.k, t.v, t.o, t.lse, {});
    ADD_FAILURE() << "an f64 CPU call was accepted";
  } catch (const Error& e) {
    EXPECT_STREQ(e.what(), "attention_naive_forward: q.dtype: expected f32 (on the CPU), got f64");
  }
}

INSTANTIATE_TEST_SUITE_P(Impls, AttentionNaiveOp, testing::ValuesIn(test::all_impls()), test::impl_param_name);

}  // namespace
}  // namespace ignis
