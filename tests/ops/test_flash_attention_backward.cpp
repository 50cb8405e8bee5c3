// The flash attention backward (CUDA bf16/f16, head_dim 64/128) against the fp64 reference
// (ref::attention_backward). The kernel gets the reference forward's o rounded to the dtype and its lse rounded
// to f32, so each case tests the backward alone; one test chains the CUDA forward into it. dq, dk and dv are
// judged against the naive same-precision backward below: the reference's loops with P and dS rounded to the
// dtype where the kernel feeds them to the tensor cores, and each gradient rounded to the dtype at the end.
// The first tests pin one assumption each (fragment layouts, the diagonal tile, skipped query tiles, ragged
// tiles); then odd lengths, GQA, masks with unequal lengths, softcap, fully masked rows and bad arguments.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <functional>
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

constexpr double kInf = std::numeric_limits<double>::infinity();

struct Inputs {
  std::vector<double> q, k, v, dout;
};

struct Grads {
  std::vector<double> dq, dk, dv;
};

// Standard normal q, k, v and dout, rounded to the dtype.
Inputs random_inputs(const ref::AttentionParams& p, DType dtype, std::uint64_t salt) {
  auto rng = test::case_rng(salt);
  const auto q_count = static_cast<std::size_t>(p.batch * p.seqlen_q * p.heads_q * p.head_dim);
  const auto kv_count = static_cast<std::size_t>(p.batch * p.seqlen_k * p.heads_kv * p.head_dim);
  Inputs in;
  in.q = test::quantize(test::random_normal(rng, q_count), dtype);
  in.k = test::quantize(test::random_normal(rng, kv_count), dtype);
  in.v = test::quantize(test::random_normal(rng, kv_count), dtype);
  in.dout = test::quantize(test::random_normal(rng, q_count), dtype);
  return in;
}

// The naive same-precision backward: ref::attention_backward's loops on the o and lse the kernel gets, with P
// rounded to `dtype` before dV += P dout and dS (scale included) rounded before dK and dQ, as the kernel rounds
// them for its tensor cores; every sum in double, the gradients rounded to `dtype`.
Grads naive_backward(const Inputs& in, const std::vector<double>& o, const std::vector<double>& lse,
                     const ref::AttentionParams& p, DType dtype) {
  const std::int64_t D = p.head_dim, group = p.heads_q / p.heads_kv;
  Grads g{std::vector<double>(in.q.size(), 0.0), std::vector<double>(in.k.size(), 0.0),
          std::vector<double>(in.v.size(), 0.0)};
  auto round = [&](double x) { return test::round_through(x, dtype); };
  auto q_at = [&](std::int64_t b, std::int64_t i, std::int64_t h) {
    return static_cast<std::size_t>(((b * p.seqlen_q + i) * p.heads_q + h) * D);
  };
  auto kv_at = [&](std::int64_t b, std::int64_t j, std::int64_t h) {
    return static_cast<std::size_t>(((b * p.seqlen_k + j) * p.heads_kv + h / group) * D);
  };
  for (std::int64_t b = 0; b < p.batch; ++b)
    for (std::int64_t h = 0; h < p.heads_q; ++h)
      for (std::int64_t i = 0; i < p.seqlen_q; ++i) {
        const double row_lse = lse[static_cast<std::size_t>((b * p.heads_q + h) * p.seqlen_q + i)];
        if (row_lse == -kInf) continue;
        const std::size_t qi = q_at(b, i, h);
        double delta = 0;
        for (std::int64_t d = 0; d < D; ++d) delta += in.dout[qi + d] * o[qi + d];
        for (std::int64_t j = 0; j < p.seqlen_k; ++j) {
          if (!ref::attention_visible(p, i, j)) continue;
          const std::size_t kj = kv_at(b, j, h);
          double s = 0, dprob = 0;
          for (std::int64_t d = 0; d < D; ++d) {
            s += in.q[qi + d] * in.k[kj + d];
            dprob += in.dout[qi + d] * in.v[kj + d];
          }
          s *= p.scale;
          double dcap = 1.0;
          if (p.softcap > 0) {
            const double th = std::tanh(s / p.softcap);
            s = p.softcap * th;
            dcap = 1.0 - th * th;
          }
          const double prob = std::exp(s - row_lse);
          const double prob_t = round(prob);
          const double ds_t = round(prob * (dprob - delta) * dcap * p.scale);
          for (std::int64_t d = 0; d < D; ++d) {
            g.dv[kj + d] += prob_t * in.dout[qi + d];
            g.dk[kj + d] += ds_t * in.q[qi + d];
            g.dq[qi + d] += ds_t * in.k[kj + d];
          }
        }
      }
  return {test::quantize(g.dq, dtype), test::quantize(g.dk, dtype), test::quantize(g.dv, dtype)};
}

struct Tensors {
  Tensor q, k, v, o, lse, dout, dq, dk, dv;
};

// The inputs on the device and poisoned gradients; o and lse as given.
Tensors device_tensors(const Impl& impl, const ref::AttentionParams& p, const Inputs& in, const std::vector<double>& o,
                       const std::vector<double>& lse) {
  const Shape q_shape{p.batch, p.seqlen_q, p.heads_q, p.head_dim};
  const Shape kv_shape{p.batch, p.seqlen_k, p.heads_kv, p.head_dim};
  return {test::make_tensor(in.q, q_shape, impl.dtype, impl.device),
          test::make_tensor(in.k, kv_shape, impl.dtype, impl.device),
          test::make_tensor(in.v, kv_shape, impl.dtype, impl.device),
          test::make_tensor(o, q_shape, impl.dtype, impl.device),
          test::make_tensor(lse, {p.batch, p.heads_q, p.seqlen_q}, DType::f32, impl.device),
          test::make_tensor(in.dout, q_shape, impl.dtype, impl.device),
          test::make_poisoned(q_shape, impl.dtype, impl.device),
          test::make_poisoned(kv_shape, impl.dtype, impl.device),
          test::make_poisoned(kv_shape, impl.dtype, impl.device)};
}

// Judges the kernel's gradients against the reference's (from the exact o and lse) with the naive bound.
void expect_grads(const Tensors& t, const ref::AttentionGrads& ref, const Grads& naive, DType dtype) {
  EXPECT_TRUE(test::close_to_reference(test::read_tensor(t.dq), ref.dq, dtype, naive.dq)) << "dq";
  EXPECT_TRUE(test::close_to_reference(test::read_tensor(t.dk), ref.dk, dtype, naive.dk)) << "dk";
  EXPECT_TRUE(test::close_to_reference(test::read_tensor(t.dv), ref.dv, dtype, naive.dv)) << "dv";
}

// Runs the backward on `in` with the reference forward's o (rounded to the dtype) and lse (rounded to f32),
// checks it, and returns what it wrote.
Grads check_inputs(const Impl& impl, const Case& c, const Inputs& in) {
  SCOPED_TRACE(testing::Message() << impl << " " << c);
  const auto p = to_ref(c);
  const auto fwd = ref::attention_forward(in.q, in.k, in.v, p);
  const auto o = test::quantize(fwd.o, impl.dtype);
  const auto lse = test::quantize(fwd.lse, DType::f32);
  const Tensors t = device_tensors(impl, p, in, o, lse);
  flash_attention_backward(t.dout, t.q, t.k, t.v, t.o, t.lse, t.dq, t.dk, t.dv, c.params);
  const auto ref = ref::attention_backward(in.q, in.k, in.v, fwd.o, in.dout, fwd.lse, p);
  expect_grads(t, ref, naive_backward(in, o, lse, p, impl.dtype), impl.dtype);
  return {test::read_tensor(t.dq), test::read_tensor(t.dk), test::read_tensor(t.dv)};
}

Grads run_case(const Impl& impl, const Case& c, std::uint64_t salt) {
  return check_inputs(impl, c, random_inputs(to_ref(c), impl.dtype, salt));
}

class FlashAttentionBackwardOp : public testing::TestWithParam<Impl> {};

#define SKIP_UNLESS_FLASH(impl) IGNIS_SKIP_UNLESS(impl, flash_attention_supported((impl).device, (impl).dtype))

// ---- one assumption each, on one or two tiles -------------------------------------------------

// 16 queries against 16 keys: one warp's K rows as A, Q and dout rows as B (S^T, dP^T), P^T and dS^T packed
// back into A for dV and dK, dS^T through shared memory for dQ, with ragged rows on both sides.
TEST_P(FlashAttentionBackwardOp, LayoutOneFragment) {
  const Impl impl = GetParam();
  SKIP_UNLESS_FLASH(impl);
  run_case(impl, shaped(1, 1, 1, 16, 16, 64), 3000);
  run_case(impl, shaped(1, 1, 1, 16, 16, 128), 3001);
}

// One full 64-key block (all four warps) against one and two 64-query steps.
TEST_P(FlashAttentionBackwardOp, LayoutFullTiles) {
  const Impl impl = GetParam();
  SKIP_UNLESS_FLASH(impl);
  run_case(impl, shaped(1, 1, 1, 64, 64, 64), 3010);
  run_case(impl, shaped(1, 1, 1, 64, 64, 128), 3011);
  run_case(impl, shaped(1, 1, 1, 128, 64, 64), 3012);
  run_case(impl, shaped(1, 1, 1, 128, 64, 128), 3013);
}

// dout = 0 zeros every gradient but leaves P: dq, dk, dv must come out exactly 0 (no poison left, nothing
// added from stale shared memory). v = 0 leaves dv (P^T dout) and gives dP = 0, so dS = -P delta: a failure
// here with dv right is in the dS path.
TEST_P(FlashAttentionBackwardOp, LayoutZeroDoutAndZeroValues) {
  const Impl impl = GetParam();
  SKIP_UNLESS_FLASH(impl);
  for (std::int64_t D : {64, 128}) {
    const Case c = shaped(1, 1, 1, 80, 70, D, {.causal = true});
    Inputs in = random_inputs(to_ref(c), impl.dtype, 3020 + static_cast<std::uint64_t>(D));
    std::fill(in.dout.begin(), in.dout.end(), 0.0);
    const Grads got = check_inputs(impl, c, in);
    for (const auto* grad : {&got.dq, &got.dk, &got.dv})
      EXPECT_EQ(*grad, std::vector<double>(grad->size(), 0.0));
    in = random_inputs(to_ref(c), impl.dtype, 3030 + static_cast<std::uint64_t>(D));
    std::fill(in.v.begin(), in.v.end(), 0.0);
    check_inputs(impl, c, in);
  }
}

// The causal diagonal inside one tile; then key blocks whose first query tiles are skipped (a key block starts
// at its diagonal's query tile) over several query steps.
TEST_P(FlashAttentionBackwardOp, CausalDiagonalAndSkippedTiles) {
  const Impl impl = GetParam();
  SKIP_UNLESS_FLASH(impl);
  run_case(impl, shaped(1, 1, 1, 64, 64, 64, {.causal = true}), 3040);
  run_case(impl, shaped(1, 1, 1, 128, 128, 128, {.causal = true}), 3041);
  run_case(impl, shaped(1, 1, 1, 256, 256, 64, {.causal = true}), 3042);
  run_case(impl, shaped(1, 1, 1, 256, 256, 128, {.causal = true}), 3043);
}

// Ragged tiles on both sides: queries past seqlen_q and keys past seqlen_k contribute nothing and are never
// written; long key ranges take many query steps per block.
TEST_P(FlashAttentionBackwardOp, RaggedTiles) {
  const Impl impl = GetParam();
  SKIP_UNLESS_FLASH(impl);
  run_case(impl, shaped(1, 1, 1, 17, 17, 64), 3050);
  run_case(impl, shaped(1, 1, 1, 65, 200, 64), 3051);
  run_case(impl, shaped(1, 1, 1, 3, 300, 128), 3052);
  run_case(impl, shaped(1, 1, 1, 300, 3, 64), 3053);
  run_case(impl, shaped(1, 1, 1, 33, 257, 64, {.scale = 0.5}), 3054);
}

// ---- shapes, heads and masks -------------------------------------------------------------------

TEST_P(FlashAttentionBackwardOp, OddSequenceLengths) {
  const Impl impl = GetParam();
  SKIP_UNLESS_FLASH(impl);
  const std::int64_t ratios[] = {1, 3, 4};
  std::uint64_t n = 0;
  for (std::int64_t seqlen_q : test::kOddSizes)
    for (std::int64_t seqlen_k : test::kOddSizes) {
      Case c;
      c.seqlen_q = seqlen_q;
      c.seqlen_k = seqlen_k;
      c.head_dim = n % 2 == 0 ? 64 : 128;
      c.ratio = ratios[n % 3];
      c.heads_kv = 1 + (n / 3) % 2;
      c.batch = 1 + (n / 2) % 2;
      c.params.causal = (n / 4) % 2 == 1;
      if (seqlen_q * seqlen_k > 100000) {  // keep the reference and compute-sanitizer runs short
        if (test::light_run() && seqlen_q * seqlen_k > 500000) continue;
        c.batch = c.heads_kv = 1;
        c.ratio = std::min<std::int64_t>(c.ratio, 3);
      }
      run_case(impl, c, 3100 + ++n);
    }
}

// dk and dv sum the group's query heads inside one block.
TEST_P(FlashAttentionBackwardOp, GroupedQueryHeads) {
  const Impl impl = GetParam();
  SKIP_UNLESS_FLASH(impl);
  std::uint64_t salt = 3200;
  for (std::int64_t ratio : {1, 3, 4, 8})
    for (bool causal : {false, true})
      run_case(impl, shaped(2, 2, ratio, 70, 90, ratio == 4 ? 128 : 64, {.causal = causal}), ++salt);
}

TEST_P(FlashAttentionBackwardOp, MasksWithUnequalLengths) {
  const Impl impl = GetParam();
  SKIP_UNLESS_FLASH(impl);
  struct Mask {
    std::int64_t seqlen_q, seqlen_k;
    bool causal;
    std::int64_t left, right;
  };
  const Mask masks[] = {
      {17, 300, true, -1, -1},   // short q at the bottom of many keys: early key blocks see every query
      {300, 17, true, -1, -1},   // long q: the first 283 rows see nothing, so get dq = 0
      {200, 130, true, -1, -1},  // diagonal crossing tile edges at an offset
      {300, 300, false, 5, 0},   {5, 3, false, 0, 0},       {113, 200, false, -1, 2},
      {400, 400, true, 130, -1}, {200, 113, false, 40, 40}, {150, 150, true, 64, -1},
      {70, 300, false, 10, 10},  // key blocks no query sees: dk = dv = 0
  };
  std::uint64_t salt = 3300;
  for (const Mask& m : masks) {
    const AttentionParams params{.causal = m.causal, .window_left = m.left, .window_right = m.right};
    ++salt;
    run_case(impl, shaped(1, 2, 2, m.seqlen_q, m.seqlen_k, salt % 2 == 0 ? 64 : 128, params), salt);
  }
}

TEST_P(FlashAttentionBackwardOp, ScaleAndSoftcap) {
  const Impl impl = GetParam();
  SKIP_UNLESS_FLASH(impl);
  const AttentionParams options[] = {
      {.scale = 0.3},
      {.scale = 0.0, .softcap = 0.5},
      {.scale = 0.3, .causal = true, .softcap = 4.0},
      {.scale = 1.0, .causal = true, .softcap = 4.0},
  };
  std::uint64_t salt = 3400;
  for (const AttentionParams& params : options) {
    ++salt;
    run_case(impl, shaped(2, 1, 3, 33, 150, salt % 2 == 0 ? 64 : 128, params), salt);
  }
}

// Rows that see no key (lse -inf) get dq = 0 exactly; keys no query sees get dk = dv = 0 exactly.
TEST_P(FlashAttentionBackwardOp, MaskedRowsAndKeysHaveZeroGradients) {
  const Impl impl = GetParam();
  SKIP_UNLESS_FLASH(impl);
  const std::int64_t D = 64, heads = 2;
  {  // 200 queries over 10 keys, causal: queries 0..189 see nothing
    const Case c = shaped(1, heads, 1, 200, 10, D, {.causal = true});
    const Grads got = run_case(impl, c, 3500);
    for (std::int64_t i = 0; i < 190; ++i)
      for (std::int64_t e = 0; e < heads * D; ++e)
        ASSERT_EQ(got.dq[static_cast<std::size_t>(i * heads * D + e)], 0.0) << "query " << i;
  }
  {  // 10 queries over 300 keys with window (5, 5): keys 0..284 are seen by no query
    const Case c = shaped(1, heads, 1, 10, 300, D, {.window_left = 5, .window_right = 5});
    const Grads got = run_case(impl, c, 3501);
    for (std::int64_t j = 0; j < 285; ++j)
      for (std::int64_t e = 0; e < heads * D; ++e) {
        ASSERT_EQ(got.dk[static_cast<std::size_t>(j * heads * D + e)], 0.0) << "key " << j;
        ASSERT_EQ(got.dv[static_cast<std::size_t>(j * heads * D + e)], 0.0) << "key " << j;
      }
  }
}

TEST_P(FlashAttentionBackwardOp, LongSequences) {
  const Impl impl = GetParam();
  SKIP_UNLESS_FLASH(impl);
  if (test::light_run()) GTEST_SKIP() << "IGNIS_TEST_LIGHT";
  run_case(impl, shaped(1, 1, 2, 2048, 2048, 64, {.causal = true}), 3600);
  run_case(impl, shaped(1, 1, 1, 1000, 3000, 128), 3601);
}

// The CUDA forward's own o and lse into the backward, as a training step runs them, against the reference.
TEST_P(FlashAttentionBackwardOp, AfterTheCudaForward) {
  const Impl impl = GetParam();
  SKIP_UNLESS_FLASH(impl);
  std::uint64_t salt = 3700;
  for (const Case& c : {shaped(2, 2, 2, 130, 130, 64, {.causal = true}), shaped(1, 1, 4, 100, 250, 128)}) {
    SCOPED_TRACE(testing::Message() << impl << " " << c);
    const auto p = to_ref(c);
    const Inputs in = random_inputs(p, impl.dtype, ++salt);
    const auto fwd = ref::attention_forward(in.q, in.k, in.v, p);
    Tensors t = device_tensors(impl, p, in, test::quantize(fwd.o, impl.dtype), test::quantize(fwd.lse, DType::f32));
    t.o = test::make_poisoned(t.q.shape(), impl.dtype, impl.device);
    t.lse = test::make_poisoned({p.batch, p.heads_q, p.seqlen_q}, DType::f32, impl.device);
    flash_attention_forward(t.q, t.k, t.v, t.o, t.lse, c.params);
    flash_attention_backward(t.dout, t.q, t.k, t.v, t.o, t.lse, t.dq, t.dk, t.dv, c.params);
    const auto ref = ref::attention_backward(in.q, in.k, in.v, fwd.o, in.dout, fwd.lse, p);
    expect_grads(t, ref, naive_backward(in, test::read_tensor(t.o), test::read_tensor(t.lse), p, impl.dtype),
                 impl.dtype);
  }
}

// ---- arguments ---------------------------------------------------------------------------------

void expect_message(const std::function<void()>& call, const char* message) {
  try {
    call();
    ADD_FAILURE() << "accepted; expected: " << message;
  } catch (const Error& e) {
    EXPECT_STREQ(e.what(), message);
  }
}

TEST_P(FlashAttentionBackwardOp, RejectsBadArguments) {
  const Impl impl = GetParam();
  SKIP_UNLESS_FLASH(impl);
  auto make = [&](const Shape& shape) { return test::make_poisoned(shape, impl.dtype, impl.device); };
  // A valid call: q, o, dout, dq [2, 5, 4, 64]; k, v, dk, dv [2, 7, 2, 64]; lse [2, 4, 5] f32.
  const Tensor q = make({2, 5, 4, 64}), o = make({2, 5, 4, 64}), dout = make({2, 5, 4, 64}), dq = make({2, 5, 4, 64});
  const Tensor k = make({2, 7, 2, 64}), v = make({2, 7, 2, 64}), dk = make({2, 7, 2, 64}), dv = make({2, 7, 2, 64});
  const Tensor lse = test::make_tensor(std::vector<double>(40, 0.0), {2, 4, 5}, DType::f32, impl.device);
  const AttentionParams none;
  EXPECT_NO_THROW(flash_attention_backward(dout, q, k, v, o, lse, dq, dk, dv, none));

  expect_message([&] { flash_attention_backward(dout, q, k, v, o, Tensor(), dq, dk, dv, none); },
                 "flash_attention_backward: lse: expected the forward's lse (defined), got an undefined tensor");
  EXPECT_ERROR_CONTAINS(flash_attention_backward(make({2, 5, 4, 128}), q, k, v, o, lse, dq, dk, dv, none),
                        "flash_attention_backward: dout.shape");
  EXPECT_ERROR_CONTAINS(flash_attention_backward(dout, q, k, v, o, lse, make({2, 7, 2, 64}), dk, dv, none),
                        "flash_attention_backward: dq.shape");
  EXPECT_ERROR_CONTAINS(flash_attention_backward(dout, q, k, v, o, lse, dq, make({2, 5, 4, 64}), dv, none),
                        "flash_attention_backward: dk.shape");
  EXPECT_ERROR_CONTAINS(flash_attention_backward(dout, q, k, v, o, lse, dq, dk, make({2, 7, 4, 64}), none),
                        "flash_attention_backward: dv.shape");
  EXPECT_ERROR_CONTAINS(flash_attention_backward(dout, q, make({1, 7, 2, 64}), v, o, lse, dq, dk, dv, none),
                        "flash_attention_backward: k.shape");
  EXPECT_ERROR_CONTAINS(flash_attention_backward(dout, q, k, v, o, make({2, 4, 5}), dq, dk, dv, none),
                        "flash_attention_backward: lse.dtype");
  const DType other = impl.dtype == DType::bf16 ? DType::f16 : DType::bf16;
  EXPECT_ERROR_CONTAINS(flash_attention_backward(test::make_poisoned({2, 5, 4, 64}, other, impl.device), q, k, v, o,
                                                 lse, dq, dk, dv, none),
                        "flash_attention_backward: dout.dtype");
  EXPECT_ERROR_CONTAINS(flash_attention_backward(dout, q, k, v, o, lse, dq,
                                                 test::make_poisoned({2, 7, 2, 64}, DType::f32, impl.device), dv,
                                                 none),
                        "flash_attention_backward: dk.dtype");
  const Tensor q80 = make({2, 5, 4, 80}), kv80 = make({2, 7, 2, 80});
  expect_message([&] { flash_attention_backward(q80, q80, kv80, kv80, q80, lse, q80, kv80, kv80, none); },
                 "flash_attention_backward: q.size(3) (head_dim): expected 64 or 128, got 80");
  Tensor host_dv = test::make_poisoned({2, 7, 2, 64}, impl.dtype, Device::cpu());
  EXPECT_ERROR_CONTAINS(flash_attention_backward(dout, q, k, v, o, lse, dq, dk, host_dv, none),
                        "flash_attention_backward: dv.device");
  const Tensor wide = make({2, 5, 4, 128});
  Tensor strided = Tensor::view(wide.data(), impl.dtype, impl.device, {2, 5, 4, 64}, contiguous_strides({2, 5, 4, 128}));
  EXPECT_ERROR_CONTAINS(flash_attention_backward(strided, q, k, v, o, lse, dq, dk, dv, none),
                        "flash_attention_backward: dout.strides");
  Tensor shifted = Tensor::view(static_cast<char*>(wide.data()) + 2, impl.dtype, impl.device, {2, 5, 4, 64});
  expect_message([&] { flash_attention_backward(dout, q, k, v, o, lse, shifted, dk, dv, none); },
                 "flash_attention_backward: dq.data: expected 16-byte aligned, got 2");
  AttentionParams bad = none;
  bad.softcap = -1.0;
  EXPECT_ERROR_CONTAINS(flash_attention_backward(dout, q, k, v, o, lse, dq, dk, dv, bad),
                        "flash_attention_backward: params.softcap");
}

TEST(FlashAttentionBackwardOp, RejectsTheCpu) {
  auto make = [](const Shape& shape) { return test::make_poisoned(shape, DType::bf16, Device::cpu()); };
  const Tensor q = make({1, 4, 2, 64}), k = make({1, 4, 2, 64});
  const Tensor lse = test::make_poisoned({1, 2, 4}, DType::f32, Device::cpu());
  expect_message([&] { flash_attention_backward(q, q, k, k, q, lse, q, k, k, {}); },
                 "flash_attention_backward: q.device: expected cuda (there is no CPU implementation), got cpu");
}

INSTANTIATE_TEST_SUITE_P(Impls, FlashAttentionBackwardOp, testing::ValuesIn(test::all_impls()),
                         test::impl_param_name);

}  // namespace
}  // namespace ignis
