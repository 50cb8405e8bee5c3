// attention_scores and attention_unfused_forward (CUDA f64/f32/f16/bf16) against the fp64
// references: scores from ref::attention_scores; the unfused pipeline from the composition
// ref::attention_scores -> ref::softmax_forward -> ref::gemm_nn. Causal with seqlen_q < seqlen_k
// and seqlen_q > seqlen_k (fully masked rows must give 0), GQA ratios 1 and 3, head_dim 64/128.
#include <gtest/gtest.h>

#include <cmath>

#include "harness/op_harness.h"
#include "ignis/ops.h"
#include "model/error_text.h"
#include "ref/attention_scores.h"
#include "ref/gemm.h"
#include "ref/softmax.h"

namespace ignis {
namespace {

using test::Impl;

class AttentionScoresOp : public testing::TestWithParam<Impl> {};

struct Case {
  ref::ScoresDims dims;
  bool causal;
  double scale_factor = 1.0;  // times 1/sqrt(head_dim); larger values make peaked softmax rows
};

Shape q_shape(const ref::ScoresDims& d) { return {d.batch, d.seqlen_q, d.heads_q, d.head_dim}; }
Shape kv_shape(const ref::ScoresDims& d) { return {d.batch, d.seqlen_k, d.heads_kv, d.head_dim}; }
double scale_of(const Case& c) { return c.scale_factor / std::sqrt(static_cast<double>(c.dims.head_dim)); }

std::string describe(const Case& c) {
  const auto& d = c.dims;
  return detail::concat("batch ", d.batch, " seqlen_q ", d.seqlen_q, " seqlen_k ", d.seqlen_k, " heads_q ", d.heads_q,
                        " heads_kv ", d.heads_kv, " head_dim ", d.head_dim, c.causal ? " causal" : "", " scale x",
                        c.scale_factor);
}

// P [batch, heads_q, seqlen_q, seqlen_k] @ V per head -> O [batch, seqlen_q, heads_q, head_dim],
// through the reference GEMM NN on V gathered per query head.
std::vector<double> apply_probabilities(const std::vector<double>& p, const std::vector<double>& v,
                                        const ref::ScoresDims& d) {
  const std::int64_t group = d.heads_q / d.heads_kv;
  std::vector<double> v_per_head;
  for (std::int64_t b = 0; b < d.batch; ++b)
    for (std::int64_t h = 0; h < d.heads_q; ++h)
      for (std::int64_t j = 0; j < d.seqlen_k; ++j) {
        const auto row = v.begin() + ((b * d.seqlen_k + j) * d.heads_kv + h / group) * d.head_dim;
        v_per_head.insert(v_per_head.end(), row, row + d.head_dim);
      }
  const auto o_heads = ref::gemm_nn(p, v_per_head, {}, {d.batch * d.heads_q, d.seqlen_q, d.head_dim, d.seqlen_k});
  std::vector<double> o(o_heads.size());
  for (std::int64_t b = 0; b < d.batch; ++b)
    for (std::int64_t h = 0; h < d.heads_q; ++h)
      for (std::int64_t i = 0; i < d.seqlen_q; ++i)
        for (std::int64_t e = 0; e < d.head_dim; ++e)
          o[((b * d.seqlen_q + i) * d.heads_q + h) * d.head_dim + e] =
              o_heads[((b * d.heads_q + h) * d.seqlen_q + i) * d.head_dim + e];
  return o;
}

// The unfused pipeline in double; with `dtype` f16/bf16 every stage's output (S, P, O) is
// rounded to it, as the naive same-precision implementation stores them.
std::vector<double> unfused_reference(const std::vector<double>& q, const std::vector<double>& k,
                                      const std::vector<double>& v, const Case& c, DType round_to) {
  const auto& d = c.dims;
  const auto s = test::quantize(ref::attention_scores(q, k, d, scale_of(c), c.causal), round_to);
  const auto p = test::quantize(ref::softmax_forward(s, d.batch * d.heads_q * d.seqlen_q, d.seqlen_k), round_to);
  return test::quantize(apply_probabilities(p, v, d), round_to);
}

// Random q, k, v for one case, quantized to `dtype`.
struct Inputs {
  std::vector<double> q, k, v;
};

Inputs random_inputs(const ref::ScoresDims& d, DType dtype, std::uint64_t salt) {
  auto rng = test::case_rng(salt);
  Inputs in;
  in.q = test::quantize(test::random_normal(rng, d.batch * d.seqlen_q * d.heads_q * d.head_dim), dtype);
  in.k = test::quantize(test::random_normal(rng, d.batch * d.seqlen_k * d.heads_kv * d.head_dim), dtype);
  in.v = test::quantize(test::random_normal(rng, in.k.size()), dtype);
  return in;
}

const std::vector<Case> kScoreCases = {
    {{1, 1, 1, 1, 1, 1}, false},       {{2, 3, 17, 2, 1, 17}, true},     {{1, 17, 3, 3, 1, 64}, true},
    {{2, 17, 113, 6, 2, 64}, true},    {{1, 113, 17, 4, 4, 128}, false}, {{1, 65, 65, 2, 2, 128}, true},
    {{2, 1, 1023, 3, 1, 64}, true},
};

TEST_P(AttentionScoresOp, ScoresMatchReference) {
  const Impl impl = GetParam();
  IGNIS_SKIP_UNLESS(impl, attention_scores_supported(impl.device, impl.dtype));
  std::uint64_t salt = 800;
  for (const Case& c : kScoreCases) {
    SCOPED_TRACE(testing::Message() << impl << " " << describe(c));
    const auto& d = c.dims;
    const auto [q, k, v] = random_inputs(d, impl.dtype, ++salt);
    Tensor ts = test::make_poisoned({d.batch, d.heads_q, d.seqlen_q, d.seqlen_k}, impl.dtype, impl.device);
    attention_scores(test::make_tensor(q, q_shape(d), impl.dtype, impl.device),
                     test::make_tensor(k, kv_shape(d), impl.dtype, impl.device), ts, {scale_of(c), c.causal});
    const auto ref = ref::attention_scores(q, k, d, scale_of(c), c.causal);
    EXPECT_TRUE(test::close_to_reference(test::read_tensor(ts), ref, impl.dtype, test::quantize(ref, impl.dtype)));
  }
}

TEST_P(AttentionScoresOp, UnfusedMatchesComposedReference) {
  const Impl impl = GetParam();
  IGNIS_SKIP_UNLESS(impl, attention_unfused_supported(impl.device, impl.dtype));
  const std::vector<Case> cases = {
      {{2, 17, 33, 3, 1, 64}, true},          // seqlen_q < seqlen_k, GQA 3
      {{1, 33, 17, 3, 3, 128}, true},         // seqlen_q > seqlen_k: 16 fully masked rows per head
      {{2, 1, 113, 6, 2, 128}, true},         // decode, GQA 3
      {{1, 113, 113, 2, 2, 64}, false},
      {{1, 3, 1, 3, 1, 64}, true},            // queries 0 and 1 see no key
      {{2, 40, 40, 2, 2, 64}, true, 8.0},     // peaked rows
      {{1, 5, 0, 3, 1, 64}, false},           // no keys at all: every output 0
  };
  std::uint64_t salt = 900;
  for (const Case& c : cases) {
    SCOPED_TRACE(testing::Message() << impl << " " << describe(c));
    const auto& d = c.dims;
    const auto [q, k, v] = random_inputs(d, impl.dtype, ++salt);
    Tensor to = test::make_poisoned(q_shape(d), impl.dtype, impl.device);
    attention_unfused_forward(test::make_tensor(q, q_shape(d), impl.dtype, impl.device),
                              test::make_tensor(k, kv_shape(d), impl.dtype, impl.device),
                              test::make_tensor(v, kv_shape(d), impl.dtype, impl.device), to,
                              {scale_of(c), c.causal});
    const auto got = test::read_tensor(to);
    const auto ref = unfused_reference(q, k, v, c, DType::f64);
    EXPECT_TRUE(test::close_to_reference(got, ref, impl.dtype, unfused_reference(q, k, v, c, impl.dtype)));
    // Queries that see no key output exactly 0.
    const std::int64_t row = d.heads_q * d.head_dim;
    for (std::int64_t b = 0; b < d.batch; ++b)
      for (std::int64_t i = 0; i < d.seqlen_q; ++i) {
        const bool blind = d.seqlen_k == 0 || (c.causal && i + d.seqlen_k - d.seqlen_q < 0);
        if (!blind) continue;
        for (std::int64_t e = 0; e < row; ++e)
          ASSERT_EQ(got[(b * d.seqlen_q + i) * row + e], 0.0) << "query " << i << " of batch " << b;
      }
  }
}

TEST_P(AttentionScoresOp, RejectsBadArguments) {
  const Impl impl = GetParam();
  IGNIS_SKIP_UNLESS(impl, attention_unfused_supported(impl.device, impl.dtype));
  auto make = [&](const Shape& shape) { return test::make_poisoned(shape, impl.dtype, impl.device); };
  const AttentionScoresParams params{0.125, true};
  Tensor q = make({2, 5, 6, 8}), k = make({2, 7, 3, 8}), s = make({2, 6, 5, 7});
  EXPECT_ERROR_CONTAINS(attention_scores(q, make({2, 7, 4, 8}), make({2, 6, 5, 7}), params),
                        "attention_scores: k.shape[2] (heads_kv)");
  EXPECT_ERROR_CONTAINS(attention_scores(q, make({2, 7, 3, 9}), s, params), "attention_scores: k.shape");
  EXPECT_ERROR_CONTAINS(attention_scores(q, make({1, 7, 3, 8}), s, params), "attention_scores: k.shape");
  EXPECT_ERROR_CONTAINS(attention_scores(q, k, make({2, 6, 7, 5}), params), "attention_scores: s.shape");
  EXPECT_ERROR_CONTAINS(attention_scores(make({10, 6, 8}), k, s, params), "attention_scores: q.dim");
  const DType other = impl.dtype == DType::f32 ? DType::f16 : DType::f32;
  EXPECT_ERROR_CONTAINS(attention_scores(q, test::make_poisoned({2, 7, 3, 8}, other, impl.device), s, params),
                        "attention_scores: k.dtype");
  Tensor strided = Tensor::view(k.data(), impl.dtype, impl.device, {2, 7, 3, 4}, {168, 24, 8, 2});
  EXPECT_ERROR_CONTAINS(attention_scores(q, strided, s, params), "attention_scores: k.strides");
  EXPECT_ERROR_CONTAINS(attention_scores(q, k.to(Device::cpu()), s, params), "attention_scores: k.device");
  EXPECT_ERROR_CONTAINS(attention_unfused_forward(q, k, make({2, 7, 3, 9}), q, params),
                        "attention_unfused_forward: v.shape");
  EXPECT_ERROR_CONTAINS(attention_unfused_forward(q, k, k, make({2, 5, 6, 9}), params),
                        "attention_unfused_forward: o.shape");
  try {
    attention_scores(q, make({2, 7, 4, 8}), s, params);
  } catch (const Error& e) {
    EXPECT_STREQ(e.what(), "attention_scores: k.shape[2] (heads_kv): expected a divisor of heads_q = 6, got 4");
  }
}

TEST(AttentionScoresOp, CpuIsNotImplemented) {
  EXPECT_FALSE(attention_scores_supported(Device::cpu(), DType::f32));
  EXPECT_FALSE(attention_unfused_supported(Device::cpu(), DType::f32));
  Tensor q = test::make_poisoned({1, 2, 1, 4}, DType::f32, Device::cpu());
  Tensor s = test::make_poisoned({1, 1, 2, 2}, DType::f32, Device::cpu());
  EXPECT_ERROR_CONTAINS(attention_scores(q, q, s, {0.5, false}), "attention_scores: dtype on cpu");
  EXPECT_ERROR_CONTAINS(attention_unfused_forward(q, q, q, q, {0.5, false}), "attention_unfused_forward: dtype on cpu");
}

INSTANTIATE_TEST_SUITE_P(Impls, AttentionScoresOp, testing::ValuesIn(test::all_impls()), test::impl_param_name);

}  // namespace
}  // namespace ignis
