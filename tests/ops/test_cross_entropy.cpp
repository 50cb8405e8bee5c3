// Every cross-entropy implementation (CPU f32; CUDA f32/f16/bf16) against the fp64 reference: odd
// shapes, GPT-2 / Llama-sized vocabularies, pad rows (some, all), large logits, i32 and i64
// targets, unaligned rows, poisoned outputs, optional outputs, and bad arguments.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <random>

#include "harness/op_harness.h"
#include "ignis/ops.h"
#include "model/error_text.h"
#include "ref/cross_entropy.h"

namespace ignis {
namespace {

using test::Impl;

class CrossEntropyOp : public testing::TestWithParam<Impl> {};

// The loss sums tens of thousands of exponentials in fp32 before one log: allow 1e-5 relative.
constexpr double kLossRtol = 1e-5;

struct Case {
  std::int64_t n = 1, vocab = 1;
  double scale = 1.0;      // logits' standard deviation
  int pad_every = 0;       // every pad_every-th row (from row 1) is pad; 0: none
  bool all_pad = false;
  std::int64_t pad_id = -100;
  DType target_dtype = DType::i64;
  std::vector<std::int64_t> targets;  // explicit targets (n of them); empty: random
};

std::ostream& operator<<(std::ostream& out, const Case& c) {
  return out << "n " << c.n << " vocab " << c.vocab << " scale " << c.scale << " pad_every " << c.pad_every
             << " all_pad " << c.all_pad << " pad_id " << c.pad_id << " targets " << c.target_dtype;
}

std::vector<std::int64_t> make_targets(std::mt19937_64& rng, const Case& c) {
  if (!c.targets.empty()) return c.targets;
  std::uniform_int_distribution<std::int64_t> dist(0, std::max<std::int64_t>(c.vocab - 1, 0));
  std::vector<std::int64_t> t(c.n);
  for (std::int64_t i = 0; i < c.n; ++i) {
    const bool pad = c.all_pad || (c.pad_every > 0 && i % c.pad_every == 1);
    t[i] = pad ? c.pad_id : dist(rng);
    if (!pad && t[i] == c.pad_id) t[i] = (t[i] + 1) % c.vocab;  // an in-vocab pad_id must not be drawn by chance
  }
  return t;
}

Tensor targets_tensor(const std::vector<std::int64_t>& t, DType dtype, Device device) {
  return test::make_tensor(std::vector<double>(t.begin(), t.end()), {static_cast<std::int64_t>(t.size())}, dtype,
                           device);
}

void check_case(const Impl& impl, const Case& c, std::uint64_t salt, bool with_grad = true, bool with_rows = true) {
  SCOPED_TRACE(testing::Message() << impl << " " << c << " grad " << with_grad << " rows " << with_rows);
  auto rng = test::case_rng(salt);
  const auto logits = test::quantize(test::random_normal(rng, c.n * c.vocab, c.scale), impl.dtype);
  const auto targets = make_targets(rng, c);
  Tensor tl = test::make_tensor(logits, {c.n, c.vocab}, impl.dtype, impl.device);
  Tensor loss = test::make_poisoned({1}, DType::f32, impl.device);
  Tensor dlogits = with_grad ? test::make_poisoned({c.n, c.vocab}, impl.dtype, impl.device) : Tensor();
  Tensor rows = with_rows ? test::make_poisoned({c.n}, DType::f32, impl.device) : Tensor();
  cross_entropy(tl, targets_tensor(targets, c.target_dtype, impl.device), c.pad_id, loss, dlogits, rows);

  const auto ref = ref::cross_entropy(logits, targets, c.vocab, c.pad_id);
  EXPECT_TRUE(test::close_to_reference(test::read_tensor(loss), {ref.loss}, DType::f32, {}, kLossRtol)) << "loss";
  if (with_rows)
    EXPECT_TRUE(test::close_to_reference(test::read_tensor(rows), ref.row_loss, DType::f32, {}, kLossRtol))
        << "row_loss";
  if (with_grad)
    EXPECT_TRUE(test::close_to_reference(test::read_tensor(dlogits), ref.dlogits, impl.dtype,
                                         test::quantize(ref.dlogits, impl.dtype)))
        << "dlogits";
}

TEST_P(CrossEntropyOp, OddShapes) {
  const Impl impl = GetParam();
  IGNIS_SKIP_UNLESS(impl, cross_entropy_supported(impl.device, impl.dtype));
  std::uint64_t salt = 0;
  for (std::int64_t n : {1, 3, 17, 113})
    for (std::int64_t vocab : test::kOddSizes) {
      ++salt;
      Case c{.n = n, .vocab = vocab, .scale = 2.0, .pad_every = 4};
      c.target_dtype = salt % 2 ? DType::i32 : DType::i64;
      if (salt % 3 == 0) c.pad_id = vocab / 2;  // a pad id inside the vocabulary
      check_case(impl, c, salt);
    }
  for (std::int64_t vocab : {8, 64, 4096}) check_case(impl, {.n = 5, .vocab = vocab, .pad_every = 3}, ++salt);
}

TEST_P(CrossEntropyOp, LargeVocabularies) {
  const Impl impl = GetParam();
  IGNIS_SKIP_UNLESS(impl, cross_entropy_supported(impl.device, impl.dtype));
  check_case(impl, {.n = 3, .vocab = 50257, .scale = 3.0, .pad_every = 2}, 100);
  check_case(impl, {.n = 4, .vocab = 32000, .scale = 3.0, .target_dtype = DType::i32}, 101);
  check_case(impl, {.n = 2, .vocab = 128256, .scale = 3.0}, 102);
  check_case(impl, {.n = 2, .vocab = 100003, .scale = 3.0}, 103);
}

// The cached CUDA kernel subtracts the target's 1 / count inside the one 16-byte pack holding it:
// a target at every position of a pack (V = 8 for 16-bit types, 4 for f32), at the row's ends,
// and around the 4-block cluster's slice boundary of a 128256 row (slices of 4008 bf16 packs).
TEST_P(CrossEntropyOp, TargetAtEveryPackPosition) {
  const Impl impl = GetParam();
  IGNIS_SKIP_UNLESS(impl, cross_entropy_supported(impl.device, impl.dtype));
  std::uint64_t salt = 150;
  for (std::int64_t vocab : {4096, 128256}) {
    std::vector<std::int64_t> targets;
    for (std::int64_t t = 0; t < 9; ++t) targets.push_back(t);
    for (std::int64_t t : {vocab / 4 - 1, vocab / 4, vocab / 2 + 3, vocab - 2, vocab - 1}) targets.push_back(t);
    check_case(impl, {.n = static_cast<std::int64_t>(targets.size()), .vocab = vocab, .scale = 2.0, .targets = targets},
               ++salt);
  }
}

TEST_P(CrossEntropyOp, LargeLogitsStayFinite) {
  const Impl impl = GetParam();
  IGNIS_SKIP_UNLESS(impl, cross_entropy_supported(impl.device, impl.dtype));
  check_case(impl, {.n = 5, .vocab = 113, .scale = 50.0, .pad_every = 3}, 200);
  check_case(impl, {.n = 3, .vocab = 1023, .scale = 50.0}, 201);
}

TEST_P(CrossEntropyOp, PadRowsAndAllPad) {
  const Impl impl = GetParam();
  IGNIS_SKIP_UNLESS(impl, cross_entropy_supported(impl.device, impl.dtype));
  check_case(impl, {.n = 17, .vocab = 17, .all_pad = true}, 300);
  check_case(impl, {.n = 3, .vocab = 1023, .all_pad = true, .pad_id = 0, .target_dtype = DType::i32}, 301);
  check_case(impl, {.n = 17, .vocab = 1023, .pad_every = 2, .pad_id = 5}, 302);
  // Exactly zero, not merely small: an all-pad batch has nothing to average.
  Tensor loss = test::make_poisoned({1}, DType::f32, impl.device);
  Tensor dl = test::make_poisoned({2, 3}, impl.dtype, impl.device);
  cross_entropy(test::make_tensor({1, 2, 3, 4, 5, 6}, {2, 3}, impl.dtype, impl.device),
                targets_tensor({7, 7}, DType::i64, impl.device), 7, loss, dl);
  EXPECT_EQ(test::read_tensor(loss), std::vector<double>{0.0});
  EXPECT_EQ(test::read_tensor(dl), std::vector<double>(6, 0.0));
}

TEST_P(CrossEntropyOp, OptionalOutputs) {
  const Impl impl = GetParam();
  IGNIS_SKIP_UNLESS(impl, cross_entropy_supported(impl.device, impl.dtype));
  const Case c{.n = 17, .vocab = 1023, .pad_every = 5};
  check_case(impl, c, 400, /*with_grad=*/false, /*with_rows=*/false);
  check_case(impl, c, 401, /*with_grad=*/true, /*with_rows=*/false);
  check_case(impl, c, 402, /*with_grad=*/false, /*with_rows=*/true);
  check_case(impl, {.n = 0, .vocab = 10}, 403);
}

// The gradient may overwrite the logits it comes from.
TEST_P(CrossEntropyOp, InPlaceGradient) {
  const Impl impl = GetParam();
  IGNIS_SKIP_UNLESS(impl, cross_entropy_supported(impl.device, impl.dtype));
  for (std::int64_t vocab : {17, 1023, 32000}) {
    SCOPED_TRACE(testing::Message() << impl << " vocab " << vocab);
    const Case c{.n = 9, .vocab = vocab, .scale = 2.0, .pad_every = 4};
    auto rng = test::case_rng(450 + vocab);
    const auto logits = test::quantize(test::random_normal(rng, c.n * c.vocab, c.scale), impl.dtype);
    const auto targets = make_targets(rng, c);
    Tensor tl = test::make_tensor(logits, {c.n, c.vocab}, impl.dtype, impl.device);
    Tensor loss = test::make_poisoned({1}, DType::f32, impl.device);
    cross_entropy(tl, targets_tensor(targets, DType::i64, impl.device), c.pad_id, loss, tl);
    const auto ref = ref::cross_entropy(logits, targets, c.vocab, c.pad_id);
    EXPECT_TRUE(test::close_to_reference(test::read_tensor(loss), {ref.loss}, DType::f32, {}, kLossRtol));
    EXPECT_TRUE(test::close_to_reference(test::read_tensor(tl), ref.dlogits, impl.dtype,
                                         test::quantize(ref.dlogits, impl.dtype)));
  }
}

// Logits and dlogits views off 16-byte boundaries (together and apart) take the scalar head/tail
// and the unvectorized paths.
TEST_P(CrossEntropyOp, UnalignedRows) {
  const Impl impl = GetParam();
  IGNIS_SKIP_UNLESS(impl, cross_entropy_supported(impl.device, impl.dtype));
  const std::int64_t n = 5, vocab = 136;
  auto rng = test::case_rng(500);
  const auto all = test::quantize(test::random_normal(rng, n * vocab + 3, 2.0), impl.dtype);
  const std::vector<std::int64_t> targets = {0, 135, 7, -1, 68};
  Tensor logit_storage = test::make_tensor(all, {n * vocab + 3}, impl.dtype, impl.device);
  const std::size_t elem = dtype_size(impl.dtype);
  for (std::int64_t shift : {1, 3})
    for (std::int64_t grad_shift : {shift, std::int64_t{0}}) {
      SCOPED_TRACE(testing::Message() << impl << " shift " << shift << " grad_shift " << grad_shift);
      Tensor tl = Tensor::view(static_cast<char*>(logit_storage.data()) + shift * elem, impl.dtype, impl.device,
                               {n, vocab});
      Tensor grad_storage = test::make_poisoned({n * vocab + 3}, impl.dtype, impl.device);
      Tensor dl = Tensor::view(static_cast<char*>(grad_storage.data()) + grad_shift * elem, impl.dtype, impl.device,
                               {n, vocab});
      Tensor loss = test::make_poisoned({1}, DType::f32, impl.device);
      cross_entropy(tl, targets_tensor(targets, DType::i32, impl.device), -1, loss, dl);
      const std::vector<double> logits(all.begin() + shift, all.begin() + shift + n * vocab);
      const auto ref = ref::cross_entropy(logits, targets, vocab, -1);
      auto got = test::read_tensor(grad_storage);
      got.erase(got.begin(), got.begin() + grad_shift);
      got.resize(n * vocab);
      EXPECT_TRUE(test::close_to_reference(test::read_tensor(loss), {ref.loss}, DType::f32, {}, kLossRtol));
      EXPECT_TRUE(test::close_to_reference(got, ref.dlogits, impl.dtype, test::quantize(ref.dlogits, impl.dtype)));
    }
}

TEST_P(CrossEntropyOp, OutOfRangeTargetsThrow) {
  const Impl impl = GetParam();
  IGNIS_SKIP_UNLESS(impl, cross_entropy_supported(impl.device, impl.dtype));
  Tensor logits = test::make_tensor(std::vector<double>(4 * 6, 0.5), {4, 6}, impl.dtype, impl.device);
  Tensor loss = test::make_poisoned({1}, DType::f32, impl.device);
  Tensor dl = test::make_poisoned({4, 6}, impl.dtype, impl.device);
  for (DType dtype : {DType::i32, DType::i64})
    for (std::int64_t bad : {6, -2, 99999}) {
      SCOPED_TRACE(testing::Message() << impl << " targets " << dtype << " bad " << bad);
      try {
        cross_entropy(logits, targets_tensor({0, -1, bad, bad}, dtype, impl.device), -1, loss, dl);
        ADD_FAILURE() << "target " << bad << " was accepted";
      } catch (const Error& e) {
        EXPECT_EQ(std::string(e.what()), "cross_entropy: targets[2]: expected an index in [0, 6), got " +
                                             std::to_string(bad));
      }
    }
  // A pad id outside the vocabulary is fine, and the op still works afterwards.
  cross_entropy(logits, targets_tensor({0, -1, 5, 5}, DType::i32, impl.device), -1, loss, dl);
  EXPECT_NEAR(test::read_tensor(loss)[0], std::log(6.0), 1e-6);
}

Tensor cleared_flag(Device device) { return test::make_tensor(std::vector<double>{-1, 0, 0}, {3}, DType::i64, device); }

// The non-syncing entry point gives the same bits as the syncing one: one block (1023, 4096),
// clusters (32000, 50257 with head and tail scalars, 128256), pad rows, optional outputs.
TEST_P(CrossEntropyOp, DeferredMatchesSyncing) {
  const Impl impl = GetParam();
  IGNIS_SKIP_UNLESS(impl, cross_entropy_supported(impl.device, impl.dtype));
  std::uint64_t salt = 600;
  for (std::int64_t vocab : {1023, 4096, 32000, 50257, 128256})
    for (bool with_grad : {true, false}) {
      const Case c{.n = 5, .vocab = vocab, .scale = 2.0, .pad_every = 3};
      SCOPED_TRACE(testing::Message() << impl << " " << c << " grad " << with_grad);
      auto rng = test::case_rng(++salt);
      const auto logits = test::quantize(test::random_normal(rng, c.n * c.vocab, c.scale), impl.dtype);
      Tensor tl = test::make_tensor(logits, {c.n, c.vocab}, impl.dtype, impl.device);
      Tensor targets = targets_tensor(make_targets(rng, c), DType::i64, impl.device);
      Tensor out[2][3];  // {syncing, deferred} x {loss, dlogits, row_loss}
      for (auto& o : out) {
        o[0] = test::make_poisoned({1}, DType::f32, impl.device);
        o[1] = with_grad ? test::make_poisoned({c.n, c.vocab}, impl.dtype, impl.device) : Tensor();
        o[2] = test::make_poisoned({c.n}, DType::f32, impl.device);
      }
      Tensor flag = cleared_flag(impl.device);
      cross_entropy(tl, targets, c.pad_id, out[0][0], out[0][1], out[0][2]);
      cross_entropy_deferred(tl, targets, c.pad_id, out[1][0], out[1][1], flag, out[1][2]);
      EXPECT_NO_THROW(cross_entropy_check_flag(flag));
      for (int k = 0; k < 3; ++k)
        if (out[0][k].defined()) EXPECT_EQ(test::read_tensor(out[1][k]), test::read_tensor(out[0][k])) << k;
    }
}

// A bad target's row counts as pad, the call does not throw, and the flag keeps the first record
// until it is cleared.
TEST_P(CrossEntropyOp, DeferredRecordsBadTargets) {
  const Impl impl = GetParam();
  IGNIS_SKIP_UNLESS(impl, cross_entropy_supported(impl.device, impl.dtype));
  auto rng = test::case_rng(700);
  const auto logits = test::quantize(test::random_normal(rng, 4 * 6, 1.0), impl.dtype);
  Tensor tl = test::make_tensor(logits, {4, 6}, impl.dtype, impl.device);
  Tensor flag = cleared_flag(impl.device);
  for (DType dtype : {DType::i32, DType::i64}) {
    SCOPED_TRACE(testing::Message() << impl << " targets " << dtype);
    cross_entropy_clear_flag(flag);
    Tensor loss = test::make_poisoned({1}, DType::f32, impl.device);
    Tensor dl = test::make_poisoned({4, 6}, impl.dtype, impl.device);
    cross_entropy_deferred(tl, targets_tensor({0, -1, 9, 3}, dtype, impl.device), -1, loss, dl, flag);
    EXPECT_EQ(test::read_tensor(flag), (std::vector<double>{2, 9, 6}));
    const std::vector<std::int64_t> as_pad = {0, -1, -1, 3};
    const auto ref = ref::cross_entropy(logits, as_pad, 6, -1);
    EXPECT_TRUE(test::close_to_reference(test::read_tensor(loss), {ref.loss}, DType::f32, {}, kLossRtol));
    EXPECT_TRUE(test::close_to_reference(test::read_tensor(dl), ref.dlogits, impl.dtype,
                                         test::quantize(ref.dlogits, impl.dtype)));
    // A later good call leaves the record; a later bad one does not replace it.
    cross_entropy_deferred(tl, targets_tensor({0, 1, 2, 3}, dtype, impl.device), -1, loss, dl, flag);
    cross_entropy_deferred(tl, targets_tensor({-5, 1, 2, 3}, dtype, impl.device), -1, loss, dl, flag);
    try {
      cross_entropy_check_flag(flag);
      ADD_FAILURE() << "the bad target was not reported";
    } catch (const Error& e) {
      EXPECT_STREQ(e.what(), "cross_entropy: targets[2]: expected an index in [0, 6), got 9");
    }
  }
  cross_entropy_clear_flag(flag);
  EXPECT_NO_THROW(cross_entropy_check_flag(flag));
  Tensor loss = test::make_poisoned({1}, DType::f32, impl.device);
  EXPECT_ERROR_CONTAINS(cross_entropy_deferred(tl, targets_tensor({0, 1, 2, 3}, DType::i64, impl.device), -1, loss,
                                               Tensor(), test::make_poisoned({2}, DType::i64, impl.device)),
                        "cross_entropy_deferred: flag.shape");
  EXPECT_ERROR_CONTAINS(cross_entropy_deferred(tl, targets_tensor({0, 1, 2, 3}, DType::i64, impl.device), -1, loss,
                                               Tensor(), test::make_poisoned({3}, DType::i32, impl.device)),
                        "cross_entropy_deferred: flag.dtype");
  EXPECT_ERROR_CONTAINS(cross_entropy_check_flag(test::make_poisoned({3}, DType::f32, impl.device)),
                        "cross_entropy_check_flag: flag.dtype");
}

TEST_P(CrossEntropyOp, RejectsBadArguments) {
  const Impl impl = GetParam();
  IGNIS_SKIP_UNLESS(impl, cross_entropy_supported(impl.device, impl.dtype));
  const Device dev = impl.device;
  const Device other_device = dev.is_cpu() ? Device::cuda(0) : Device::cpu();
  const DType other_dtype = impl.dtype == DType::f32 ? DType::f16 : DType::f32;
  Tensor logits = test::make_poisoned({4, 8}, impl.dtype, dev);
  Tensor targets = targets_tensor({0, 1, 2, 3}, DType::i64, dev);
  Tensor loss = test::make_poisoned({1}, DType::f32, dev);
  Tensor dl = test::make_poisoned({4, 8}, impl.dtype, dev);

  EXPECT_ERROR_CONTAINS(cross_entropy(logits, targets_tensor({0, 1, 2}, DType::i64, dev), -1, loss, dl),
                        "cross_entropy: targets.shape");
  EXPECT_ERROR_CONTAINS(cross_entropy(logits, test::make_poisoned({4}, DType::f32, dev), -1, loss, dl),
                        "cross_entropy: targets.dtype");
  EXPECT_ERROR_CONTAINS(cross_entropy(logits, targets.reshape({4, 1}), -1, loss, dl), "cross_entropy: targets.dim");
  EXPECT_ERROR_CONTAINS(cross_entropy(logits, targets, -1, test::make_poisoned({1}, DType::f64, dev), dl),
                        "cross_entropy: loss.dtype");
  EXPECT_ERROR_CONTAINS(cross_entropy(logits, targets, -1, test::make_poisoned({2}, DType::f32, dev), dl),
                        "cross_entropy: loss.shape");
  EXPECT_ERROR_CONTAINS(cross_entropy(logits, targets, -1, loss, test::make_poisoned({4, 9}, impl.dtype, dev)),
                        "cross_entropy: dlogits.shape");
  EXPECT_ERROR_CONTAINS(cross_entropy(logits, targets, -1, loss, test::make_poisoned({4, 8}, other_dtype, dev)),
                        "cross_entropy: dlogits.dtype");
  EXPECT_ERROR_CONTAINS(cross_entropy(logits, targets, -1, loss, dl, test::make_poisoned({3}, DType::f32, dev)),
                        "cross_entropy: row_loss.shape");
  EXPECT_ERROR_CONTAINS(cross_entropy(logits.reshape({32}), targets, -1, loss, dl), "cross_entropy: logits.dim");
  EXPECT_ERROR_CONTAINS(
      cross_entropy(logits, Tensor::view(targets.data(), DType::i64, other_device, {4}), -1, loss, dl),
      "cross_entropy: targets.device");
  EXPECT_ERROR_CONTAINS(
      cross_entropy(logits, targets, -1, Tensor::view(loss.data(), DType::f32, other_device, {1}), dl),
      "cross_entropy: loss.device");
  Tensor strided = Tensor::view(logits.data(), impl.dtype, dev, {4, 4}, {8, 2});
  EXPECT_ERROR_CONTAINS(cross_entropy(strided, targets, -1, loss, test::make_poisoned({4, 4}, impl.dtype, dev)),
                        "cross_entropy: logits.strides");
  try {
    cross_entropy(logits, test::make_poisoned({4}, DType::bf16, dev), -1, loss, dl);
  } catch (const Error& e) {
    EXPECT_STREQ(e.what(), "cross_entropy: targets.dtype: expected i32 or i64, got bf16");
  }
  try {
    cross_entropy(logits, targets, -1, loss, test::make_poisoned({4, 9}, impl.dtype, dev));
  } catch (const Error& e) {
    EXPECT_STREQ(e.what(), "cross_entropy: dlogits.shape: expected [4, 8], got [4, 9]");
  }
}

TEST(CrossEntropyOp, RejectsUnsupportedDtype) {
  EXPECT_FALSE(cross_entropy_supported(Device::cpu(), DType::bf16));
  Tensor logits = test::make_poisoned({1, 2}, DType::f64, Device::cpu());
  Tensor loss = test::make_poisoned({1}, DType::f32, Device::cpu());
  EXPECT_ERROR_CONTAINS(cross_entropy(logits, targets_tensor({0}, DType::i64, Device::cpu()), -1, loss, Tensor()),
                        "cross_entropy: logits.dtype on cpu");
}

INSTANTIATE_TEST_SUITE_P(Impls, CrossEntropyOp, testing::ValuesIn(test::all_impls()), test::impl_param_name);

}  // namespace
}  // namespace ignis
