// Every transpose implementation against the reference over odd shapes, batches and the 2-D
// form. Transposing moves values unchanged, so results must match to the tolerance floor.
#include <gtest/gtest.h>

#include "harness/op_harness.h"
#include "ignis/ops.h"
#include "model/error_text.h"
#include "ref/transpose.h"

namespace ignis {
namespace {

using test::Impl;

class TransposeOp : public testing::TestWithParam<Impl> {};

void check_transpose(const Impl& impl, std::int64_t batch, std::int64_t rows, std::int64_t cols, bool batched,
                     std::uint64_t salt) {
  SCOPED_TRACE(testing::Message() << impl << " batch " << batch << " rows " << rows << " cols " << cols);
  auto rng = test::case_rng(salt);
  const auto x = test::quantize(test::random_normal(rng, batch * rows * cols), impl.dtype);
  Tensor tx = test::make_tensor(x, batched ? Shape{batch, rows, cols} : Shape{rows, cols}, impl.dtype, impl.device);
  Tensor ty = test::make_poisoned(batched ? Shape{batch, cols, rows} : Shape{cols, rows}, impl.dtype, impl.device);
  transpose(tx, ty);
  const auto ref = ref::transpose(x, batch, rows, cols);
  // The naive result is the reference itself: only the floor of the tolerance remains.
  EXPECT_TRUE(test::close_to_reference(test::read_tensor(ty), ref, impl.dtype, ref));
}

TEST_P(TransposeOp, OddShapes) {
  const Impl impl = GetParam();
  IGNIS_SKIP_UNLESS(impl, transpose_supported(impl.device, impl.dtype));
  std::uint64_t salt = 500;
  for (std::int64_t rows : test::kOddSizes)
    for (std::int64_t cols : {1, 17, 1023}) check_transpose(impl, 2, rows, cols, true, ++salt);
  check_transpose(impl, 3, 32, 32, true, ++salt);
  check_transpose(impl, 5, 33, 65, true, ++salt);
  check_transpose(impl, 1, 3, 113, false, ++salt);
  check_transpose(impl, 1, 1023, 3, false, ++salt);
}

TEST_P(TransposeOp, RejectsBadArguments) {
  const Impl impl = GetParam();
  IGNIS_SKIP_UNLESS(impl, transpose_supported(impl.device, impl.dtype));
  auto make = [&](const Shape& shape) { return test::make_poisoned(shape, impl.dtype, impl.device); };
  Tensor x = make({2, 3, 5});
  EXPECT_ERROR_CONTAINS(transpose(x, make({2, 3, 5})), "transpose: y.shape");
  EXPECT_ERROR_CONTAINS(transpose(x, make({5, 3})), "transpose: y.shape");
  EXPECT_ERROR_CONTAINS(transpose(make({7}), make({7})), "transpose: x.dim");
  const DType other = impl.dtype == DType::f32 ? DType::f64 : DType::f32;
  EXPECT_ERROR_CONTAINS(transpose(x, test::make_poisoned({2, 5, 3}, other, impl.device)), "transpose: y.dtype");
  Tensor strided = Tensor::view(x.data(), impl.dtype, impl.device, {2, 3, 2}, {15, 5, 2});
  EXPECT_ERROR_CONTAINS(transpose(strided, make({2, 2, 3})), "transpose: x.strides");
  if (impl.device.is_cuda())
    EXPECT_ERROR_CONTAINS(transpose(x, test::make_poisoned({2, 5, 3}, impl.dtype, Device::cpu())),
                          "transpose: y.device");
  try {
    transpose(x, make({2, 3, 5}));
  } catch (const Error& e) {
    EXPECT_STREQ(e.what(), "transpose: y.shape: expected [2, 5, 3], got [2, 3, 5]");
  }
}

INSTANTIATE_TEST_SUITE_P(Impls, TransposeOp, testing::ValuesIn(test::all_impls()), test::impl_param_name);

}  // namespace
}  // namespace ignis
