// The naive attention backward (CPU f32) against the fp64 reference (ref::attention_backward) given the same o and
// lse: odd sequence lengths, GQA, causal/window/softcap masks with seqlen_q != seqlen_k, rows and keys that no mask
// lets through, the CPU forward chained into it, and bad arguments.
#include <gtest/gtest.h>

#include <algorithm>
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

struct Grads {
  std::vector<double> dq, dk, dv;
};

// Random q, k, v, dout in the dtype, o and lse from `forward` (the reference's, rounded, or the op's own), the
// gradients checked against the reference run on exactly those o and lse; returns what the op wrote.
Grads run_case(const Impl& impl, const Case& c, std::uint64_t salt, bool op_forward = false) {
  SCOPED_TRACE(testing::Message() << impl << " " << c << (op_forward ? " after the op's forward" : ""));
  const auto p = to_ref(c);
  const Shape q_shape{p.batch, p.seqlen_q, p.heads_q, p.head_dim};
  const Shape kv_shape{p.batch, p.seqlen_k, p.heads_kv, p.head_dim};
  const Shape lse_shape{p.batch, p.heads_q, p.seqlen_q};
  auto rng = test::case_rng(salt);
  const test::AttentionInputs in = test::random_attention_inputs(p, impl.dtype, impl.device, rng);
  const auto dout = test::quantize(test::random_normal(rng, in.q.size()), impl.dtype);
  Tensor tdout = test::make_tensor(dout, q_shape, impl.dtype, impl.device);
  Tensor to, tlse;
  if (op_forward) {
    to = test::make_poisoned(q_shape, impl.dtype, impl.device);
    tlse = test::make_poisoned(lse_shape, DType::f32, impl.device);
    attention_naive_forward(in.tq, in.tk, in.tv, to, tlse, c.params);
  } else {
    const auto fwd = ref::attention_forward(in.q, in.k, in.v, p);
    to = test::make_tensor(fwd.o, q_shape, impl.dtype, impl.device);
    tlse = test::make_tensor(fwd.lse, lse_shape, DType::f32, impl.device);
  }
  Tensor tdq = test::make_poisoned(q_shape, impl.dtype, impl.device);
  Tensor tdk = test::make_poisoned(kv_shape, impl.dtype, impl.device);
  Tensor tdv = test::make_poisoned(kv_shape, impl.dtype, impl.device);
  attention_naive_backward(tdout, in.tq, in.tk, in.tv, to, tlse, tdq, tdk, tdv, c.params);
  const auto ref =
      ref::attention_backward(in.q, in.k, in.v, test::read_tensor(to), dout, test::read_tensor(tlse), p);
  Grads got{test::read_tensor(tdq), test::read_tensor(tdk), test::read_tensor(tdv)};
  EXPECT_TRUE(test::close_to_reference(got.dq, ref.dq, impl.dtype)) << "dq";
  EXPECT_TRUE(test::close_to_reference(got.dk, ref.dk, impl.dtype)) << "dk";
  EXPECT_TRUE(test::close_to_reference(got.dv, ref.dv, impl.dtype)) << "dv";
  return got;
}

class AttentionNaiveBackwardOp : public testing::TestWithParam<Impl> {};

#define SKIP_UNLESS_SUPPORTED(impl) \
  IGNIS_SKIP_UNLESS(impl, attention_naive_backward_supported((impl).device, (impl).dtype))

TEST_P(AttentionNaiveBackwardOp, OddSequenceLengthsAndHeads) {
  const Impl impl = GetParam();
  SKIP_UNLESS_SUPPORTED(impl);
  const std::int64_t head_dims[] = {16, 64, 80};
  const std::int64_t ratios[] = {1, 3, 2};
  std::uint64_t n = 0;
  for (std::int64_t seqlen_q : {1, 17, 113})
    for (std::int64_t seqlen_k : {1, 3, 113}) {
      const Case c = shaped(1 + n % 2, 1 + (n / 3) % 2, ratios[n % 3], seqlen_q, seqlen_k, head_dims[n % 3],
                            {.causal = (n / 2) % 2 == 1});
      run_case(impl, c, 5000 + ++n);
    }
}

TEST_P(AttentionNaiveBackwardOp, MasksWithUnequalLengthsAndSoftcap) {
  const Impl impl = GetParam();
  SKIP_UNLESS_SUPPORTED(impl);
  const AttentionParams options[] = {
      {.causal = true},
      {.window_left = 5, .window_right = 0},
      {.causal = true, .window_left = 20},
      {.window_left = 10, .window_right = 10},
      {.scale = 0.3, .softcap = 0.5},
      {.scale = 1.0, .causal = true, .softcap = 4.0},
  };
  std::uint64_t salt = 5100;
  for (const AttentionParams& params : options) {
    run_case(impl, shaped(1, 2, 2, 40, 70, 32, params), ++salt);
    run_case(impl, shaped(1, 1, 3, 70, 40, 32, params), ++salt);
  }
}

// The op's own forward (f32 o and lse) into its backward, as a training step runs them.
TEST_P(AttentionNaiveBackwardOp, AfterTheForward) {
  const Impl impl = GetParam();
  SKIP_UNLESS_SUPPORTED(impl);
  run_case(impl, shaped(2, 2, 2, 50, 60, 64, {.causal = true}), 5200, true);
  run_case(impl, shaped(1, 1, 4, 33, 90, 48, {.window_left = 8, .softcap = 2.0}), 5201, true);
}

// Rows that see no key (lse -inf) get dq = 0 exactly; keys no query sees get dk = dv = 0 exactly.
TEST_P(AttentionNaiveBackwardOp, MaskedRowsAndKeysHaveZeroGradients) {
  const Impl impl = GetParam();
  SKIP_UNLESS_SUPPORTED(impl);
  const std::int64_t D = 16, heads = 2;
  const Grads rows = run_case(impl, shaped(1, heads, 1, 30, 10, D, {.causal = true}), 5300);  // rows 0..19 see none
  for (std::int64_t e = 0; e < 20 * heads * D; ++e) ASSERT_EQ(rows.dq[static_cast<std::size_t>(e)], 0.0) << e;
  const Grads keys = run_case(impl, shaped(1, heads, 1, 5, 40, D, {.window_left = 2, .window_right = 2}), 5301);
  for (std::int64_t e = 0; e < 33 * heads * D; ++e) {  // keys 0..32 are seen by no query
    ASSERT_EQ(keys.dk[static_cast<std::size_t>(e)], 0.0) << e;
    ASSERT_EQ(keys.dv[static_cast<std::size_t>(e)], 0.0) << e;
  }
}

TEST_P(AttentionNaiveBackwardOp, RejectsBadArguments) {
  const Impl impl = GetParam();
  SKIP_UNLESS_SUPPORTED(impl);
  auto make = [&](const Shape& shape, DType dtype = DType::f32) {
    std::size_t count = 1;
    for (const std::int64_t extent : shape) count *= static_cast<std::size_t>(extent);
    return test::make_tensor(std::vector<double>(count, 0.0), shape, dtype, impl.device);
  };
  // A valid call: q, o, dout, dq [2, 5, 4, 16]; k, v, dk, dv [2, 7, 2, 16]; lse [2, 4, 5].
  const Tensor q = make({2, 5, 4, 16}), o = make({2, 5, 4, 16}), dout = make({2, 5, 4, 16}), dq = make({2, 5, 4, 16});
  const Tensor k = make({2, 7, 2, 16}), v = make({2, 7, 2, 16}), dk = make({2, 7, 2, 16}), dv = make({2, 7, 2, 16});
  const Tensor lse = make({2, 4, 5});
  const AttentionParams none;
  EXPECT_NO_THROW(attention_naive_backward(dout, q, k, v, o, lse, dq, dk, dv, none));
  EXPECT_ERROR_CONTAINS(attention_naive_backward(make({2, 5, 4, 8}), q, k, v, o, lse, dq, dk, dv, none),
                        "attention_naive_backward: dout.shape");
  EXPECT_ERROR_CONTAINS(attention_naive_backward(dout, q, k, v, o, make({2, 5, 4}), dq, dk, dv, none),
                        "attention_naive_backward: lse.shape");
  EXPECT_ERROR_CONTAINS(attention_naive_backward(dout, q, k, v, o, lse, make({2, 7, 2, 16}), dk, dv, none),
                        "attention_naive_backward: dq.shape");
  EXPECT_ERROR_CONTAINS(attention_naive_backward(dout, q, k, v, o, lse, dq, make({2, 5, 4, 16}), dv, none),
                        "attention_naive_backward: dk.shape");
  EXPECT_ERROR_CONTAINS(attention_naive_backward(dout, q, k, v, o, lse, dq, dk, make({2, 7, 2, 16}, DType::f64), none),
                        "attention_naive_backward: dv.dtype");
  EXPECT_ERROR_CONTAINS(attention_naive_backward(dout, q, make({2, 7, 3, 16}), make({2, 7, 3, 16}), o, lse, dq, dk,
                                                 dv, none),
                        "attention_naive_backward: q.size(2) (heads_q)");
  const Tensor q64 = make({2, 5, 4, 16}, DType::f64), kv64 = make({2, 7, 2, 16}, DType::f64);
  EXPECT_ERROR_CONTAINS(attention_naive_backward(q64, q64, kv64, kv64, q64, lse, q64, kv64, kv64, none),
                        "attention_naive_backward: q.dtype: expected f32 (on the CPU), got f64");
  AttentionParams bad = none;
  bad.window_right = -3;
  EXPECT_ERROR_CONTAINS(attention_naive_backward(dout, q, k, v, o, lse, dq, dk, dv, bad),
                        "attention_naive_backward: params.window_right");
}

// On a GPU the backward of f32 is not offered: the error names what is.
TEST_P(AttentionNaiveBackwardOp, NamesTheCudaBackward) {
  const Impl impl = GetParam();
  IGNIS_SKIP_UNLESS(impl, impl.device.is_cuda() && impl.dtype == DType::f32);
  const Tensor q = test::make_poisoned({1, 4, 2, 16}, DType::f32, impl.device);
  const Tensor lse = test::make_poisoned({1, 2, 4}, DType::f32, impl.device);
  try {
    attention_naive_backward(q, q, q, q, q, lse, q, q, q, {});
    ADD_FAILURE() << "a CUDA f32 backward was accepted";
  } catch (const Error& e) {
    EXPECT_STREQ(e.what(),
                 "attention_naive_backward: q: expected f32 on the CPU (on CUDA, flash_attention_backward takes bf16 "
                 "and f16), got f32 on cuda:0");
  }
}

INSTANTIATE_TEST_SUITE_P(Impls, AttentionNaiveBackwardOp, testing::ValuesIn(test::all_impls()),
                         test::impl_param_name);

}  // namespace
}  // namespace ignis
