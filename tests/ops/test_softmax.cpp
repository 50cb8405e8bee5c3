// Every softmax implementation (CPU f32; CUDA f32/f16/bf16) against the fp64 reference over
// random shapes with odd sizes, poisoned outputs, large logits and -inf masks.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>

#include "harness/op_harness.h"
#include "ignis/ops.h"
#include "model/error_text.h"
#include "ref/softmax.h"

namespace ignis {
namespace {

using test::Impl;

class SoftmaxOp : public testing::TestWithParam<Impl> {};

// Forward on one [rows, cols] case; `logit_scale` 50 exercises large logits, `mask_every`
// sets every n-th entry to -inf (and row 0 entirely, when rows > 1).
void check_forward(const Impl& impl, std::int64_t rows, std::int64_t cols, double logit_scale, int mask_every,
                   std::uint64_t salt) {
  SCOPED_TRACE(testing::Message() << impl << " rows " << rows << " cols " << cols << " scale " << logit_scale
                                  << " mask " << mask_every);
  auto rng = test::case_rng(salt);
  auto x = test::random_normal(rng, rows * cols, logit_scale);
  if (mask_every > 0) {
    for (std::size_t i = 0; i < x.size(); i += mask_every) x[i] = -std::numeric_limits<double>::infinity();
    if (rows > 1)
      for (std::int64_t c = 0; c < cols; ++c) x[c] = -std::numeric_limits<double>::infinity();
  }
  x = test::quantize(x, impl.dtype);
  Tensor tx = test::make_tensor(x, {rows, cols}, impl.dtype, impl.device);
  Tensor ty = test::make_poisoned({rows, cols}, impl.dtype, impl.device);
  softmax_forward(tx, ty);
  const auto ref = ref::softmax_forward(x, rows, cols);
  EXPECT_TRUE(test::close_to_reference(test::read_tensor(ty), ref, impl.dtype, test::quantize(ref, impl.dtype)));
}

TEST_P(SoftmaxOp, ForwardOddShapes) {
  const Impl impl = GetParam();
  IGNIS_SKIP_UNLESS(impl, softmax_supported(impl.device, impl.dtype));
  std::uint64_t salt = 0;
  for (std::int64_t rows : {1, 3, 17})
    for (std::int64_t cols : test::kOddSizes) check_forward(impl, rows, cols, 1.0, 0, ++salt);
  for (std::int64_t cols : {8, 64, 4096, 5000}) check_forward(impl, 4, cols, 1.0, 0, ++salt);
}

TEST_P(SoftmaxOp, ForwardLargeLogitsAndMasks) {
  const Impl impl = GetParam();
  IGNIS_SKIP_UNLESS(impl, softmax_supported(impl.device, impl.dtype));
  std::uint64_t salt = 1000;
  for (std::int64_t cols : {3, 113, 1024}) {
    check_forward(impl, 5, cols, 50.0, 0, ++salt);
    check_forward(impl, 5, cols, 1.0, 3, ++salt);
  }
}

// The CUDA register path takes rows of up to 512 whole 16-byte packs (V = 8 elements for 16-bit
// types, 4 for f32) with 32-128 threads of 4 packs: sizes at and around its thread-count steps and
// its limit (513 packs take the shared-memory kernel), with masks and a fully masked row.
TEST_P(SoftmaxOp, ForwardShortRowBoundaries) {
  const Impl impl = GetParam();
  IGNIS_SKIP_UNLESS(impl, softmax_supported(impl.device, impl.dtype));
  const std::int64_t v = 16 / static_cast<std::int64_t>(dtype_size(impl.dtype));
  std::uint64_t salt = 3000;
  for (std::int64_t packs : {1, 31, 32, 33, 128, 129, 500, 512, 513}) {
    check_forward(impl, 3, packs * v, 1.0, 0, ++salt);
    check_forward(impl, 3, packs * v, 50.0, 0, ++salt);
    check_forward(impl, 3, packs * v, 1.0, 5, ++salt);
  }
}

TEST_P(SoftmaxOp, ForwardLongRows) {
  const Impl impl = GetParam();
  IGNIS_SKIP_UNLESS(impl, softmax_supported(impl.device, impl.dtype));
  check_forward(impl, 2, 262144, 2.0, 0, 2000);
  check_forward(impl, 1, 100003, 2.0, 0, 2001);
  // The CUDA row-in-registers paths: one block (32000), a cluster of blocks (128256), each with a
  // fully masked row 0.
  check_forward(impl, 3, 32000, 1.0, 7, 2002);
  check_forward(impl, 3, 128256, 1.0, 7, 2003);
  // 16-bit rows of 16-32 KB, whose blocks ask for more shared memory than their row (row_residency.h).
  check_forward(impl, 264, 8192, 1.0, 0, 2005);
  check_forward(impl, 264, 16384, 1.0, 0, 2006);
  // Rows too long for a 16-block cluster's shared memory take the streaming (two-read) kernel.
  if (!test::light_run()) check_forward(impl, 2, 2097152, 2.0, 0, 2004);
}

void check_backward(const Impl& impl, std::int64_t rows, std::int64_t cols, std::uint64_t salt) {
  SCOPED_TRACE(testing::Message() << impl << " rows " << rows << " cols " << cols);
  auto rng = test::case_rng(salt);
  const auto y =
      test::quantize(ref::softmax_forward(test::random_normal(rng, rows * cols, 2.0), rows, cols), impl.dtype);
  const auto dy = test::quantize(test::random_normal(rng, rows * cols), impl.dtype);
  Tensor ty = test::make_tensor(y, {rows, cols}, impl.dtype, impl.device);
  Tensor tdy = test::make_tensor(dy, {rows, cols}, impl.dtype, impl.device);
  Tensor tdx = test::make_poisoned({rows, cols}, impl.dtype, impl.device);
  softmax_backward(ty, tdy, tdx);
  const auto ref = ref::softmax_backward(y, dy, rows, cols);
  EXPECT_TRUE(test::close_to_reference(test::read_tensor(tdx), ref, impl.dtype, test::quantize(ref, impl.dtype)));
}

TEST_P(SoftmaxOp, BackwardOddShapes) {
  const Impl impl = GetParam();
  IGNIS_SKIP_UNLESS(impl, softmax_supported(impl.device, impl.dtype));
  std::uint64_t salt = 3000;
  for (std::int64_t rows : {1, 17})
    for (std::int64_t cols : test::kOddSizes) check_backward(impl, rows, cols, ++salt);
}

// Rows cached in one block (64, 4096) or across a cluster of blocks (32000 up to 262144), and the
// streaming kernel past what a cluster holds (2097152).
// The CUDA register path of the backward: the same pack counts as ForwardShortRowBoundaries.
TEST_P(SoftmaxOp, BackwardShortRowBoundaries) {
  const Impl impl = GetParam();
  IGNIS_SKIP_UNLESS(impl, softmax_supported(impl.device, impl.dtype));
  const std::int64_t v = 16 / static_cast<std::int64_t>(dtype_size(impl.dtype));
  std::uint64_t salt = 3100;
  for (std::int64_t packs : {1, 31, 32, 33, 128, 129, 500, 512, 513}) check_backward(impl, 3, packs * v, ++salt);
}

TEST_P(SoftmaxOp, BackwardLongRows) {
  const Impl impl = GetParam();
  IGNIS_SKIP_UNLESS(impl, softmax_supported(impl.device, impl.dtype));
  std::uint64_t salt = 3100;
  for (std::int64_t cols : {64, 4096, 32000, 128256, 262144}) check_backward(impl, 2, cols, ++salt);
  if (!test::light_run()) check_backward(impl, 1, 2097152, ++salt);  // the streaming kernel
}

TEST_P(SoftmaxOp, RejectsBadArguments) {
  const Impl impl = GetParam();
  IGNIS_SKIP_UNLESS(impl, softmax_supported(impl.device, impl.dtype));
  Tensor x = test::make_poisoned({4, 8}, impl.dtype, impl.device);
  Tensor wrong_shape = test::make_poisoned({4, 9}, impl.dtype, impl.device);
  Tensor wrong_rank = test::make_poisoned({32}, impl.dtype, impl.device);
  const DType other = impl.dtype == DType::f32 ? DType::f64 : DType::f32;
  Tensor wrong_dtype = test::make_poisoned({4, 8}, other, impl.device);
  Tensor strided = Tensor::view(x.data(), impl.dtype, impl.device, {4, 4}, {8, 2});
  EXPECT_ERROR_CONTAINS(softmax_forward(x, wrong_shape), "softmax_forward: y.shape");
  EXPECT_ERROR_CONTAINS(softmax_forward(wrong_rank, wrong_rank), "softmax_forward: x.dim");
  EXPECT_ERROR_CONTAINS(softmax_forward(x, wrong_dtype), "softmax_forward: y.dtype");
  EXPECT_ERROR_CONTAINS(softmax_forward(strided, strided), "softmax_forward: x.strides");
  try {
    softmax_forward(x, wrong_shape);
  } catch (const Error& e) {
    EXPECT_STREQ(e.what(), "softmax_forward: y.shape: expected [4, 8], got [4, 9]");
  }
}

TEST(SoftmaxOp, RejectsUnsupportedDtype) {
  Tensor x = test::make_poisoned({2, 2}, DType::i32, Device::cpu());
  EXPECT_FALSE(softmax_supported(Device::cpu(), DType::i32));
  EXPECT_ERROR_CONTAINS(softmax_forward(x, x), "softmax_forward: x.dtype on cpu");
}

INSTANTIATE_TEST_SUITE_P(Impls, SoftmaxOp, testing::ValuesIn(test::all_impls()), test::impl_param_name);

}  // namespace
}  // namespace ignis
