// Every GEMM implementation (CPU f32; CUDA f64/f32/f16/bf16) against the fp64 reference, NN and
// NT, over odd shapes (m, n, k from 1, 3, 17, 113, 1023), batches, alpha/beta and poisoned outputs.
#include <gtest/gtest.h>

#include "harness/op_harness.h"
#include "ignis/ops.h"
#include "model/error_text.h"
#include "ref/gemm.h"

namespace ignis {
namespace {

using test::Impl;

class GemmOp : public testing::TestWithParam<Impl> {};

struct Case {
  std::int64_t batch, m, n, k;
};

// A spread of the odd sizes rather than their full cross product: every size appears as m, n
// and k, with a large dimension paired with small ones to keep the cases fast.
const std::vector<Case> kCases = {
    {1, 1, 1, 1},     {2, 1, 17, 1023}, {3, 3, 113, 17},  {2, 17, 3, 113},  {1, 113, 17, 3},
    {2, 17, 17, 17},  {1, 1023, 3, 1},  {1, 3, 1023, 3},  {2, 113, 113, 113}, {1, 1, 1023, 17},
    {2, 17, 1, 1023}, {1, 1023, 17, 17}, {3, 3, 3, 1023}, {2, 113, 1, 3},   {1, 64, 128, 32},
};

void check_gemm(const Impl& impl, const Case& c, bool trans_b, double alpha, double beta, bool batched,
                std::uint64_t salt) {
  SCOPED_TRACE(testing::Message() << impl << (trans_b ? " NT" : " NN") << " batch " << c.batch << " m " << c.m
                                  << " n " << c.n << " k " << c.k << " alpha " << alpha << " beta " << beta);
  auto rng = test::case_rng(salt);
  const auto a = test::quantize(test::random_normal(rng, c.batch * c.m * c.k), impl.dtype);
  const auto b = test::quantize(test::random_normal(rng, c.batch * c.k * c.n), impl.dtype);
  const ref::GemmDims dims{c.batch, c.m, c.n, c.k};
  auto shape = [&](std::int64_t rows, std::int64_t cols) {
    return batched ? Shape{c.batch, rows, cols} : Shape{rows, cols};
  };
  Tensor ta = test::make_tensor(a, shape(c.m, c.k), impl.dtype, impl.device);
  Tensor tb = test::make_tensor(b, trans_b ? shape(c.n, c.k) : shape(c.k, c.n), impl.dtype, impl.device);
  std::vector<double> c_in;
  Tensor tc;
  if (beta == 0.0) {
    tc = test::make_poisoned(shape(c.m, c.n), impl.dtype, impl.device);  // must be written, never read
  } else {
    c_in = test::quantize(test::random_normal(rng, c.batch * c.m * c.n), impl.dtype);
    tc = test::make_tensor(c_in, shape(c.m, c.n), impl.dtype, impl.device);
  }
  // The same random values serve as B [k, n] for NN and as B [n, k] for NT.
  const auto ref = trans_b ? ref::gemm_nt(a, b, c_in, dims, alpha, beta) : ref::gemm_nn(a, b, c_in, dims, alpha, beta);
  if (trans_b)
    gemm_nt(ta, tb, tc, alpha, beta);
  else
    gemm_nn(ta, tb, tc, alpha, beta);
  EXPECT_TRUE(test::close_to_reference(test::read_tensor(tc), ref, impl.dtype, test::quantize(ref, impl.dtype)));
}

TEST_P(GemmOp, NnOddShapes) {
  const Impl impl = GetParam();
  IGNIS_SKIP_UNLESS(impl, gemm_supported(impl.device, impl.dtype));
  std::uint64_t salt = 100;
  for (const Case& c : kCases) check_gemm(impl, c, false, 1.0, 0.0, true, ++salt);
}

TEST_P(GemmOp, NtOddShapes) {
  const Impl impl = GetParam();
  IGNIS_SKIP_UNLESS(impl, gemm_supported(impl.device, impl.dtype));
  std::uint64_t salt = 200;
  for (const Case& c : kCases) check_gemm(impl, c, true, 1.0, 0.0, true, ++salt);
}

TEST_P(GemmOp, AlphaBetaAndUnbatched) {
  const Impl impl = GetParam();
  IGNIS_SKIP_UNLESS(impl, gemm_supported(impl.device, impl.dtype));
  std::uint64_t salt = 300;
  for (bool trans_b : {false, true}) {
    check_gemm(impl, {2, 17, 113, 3}, trans_b, 0.5, -2.0, true, ++salt);
    check_gemm(impl, {1, 113, 17, 65}, trans_b, -1.5, 1.0, true, ++salt);
    check_gemm(impl, {1, 3, 17, 1023}, trans_b, 1.0, 0.0, false, ++salt);
    check_gemm(impl, {1, 70, 33, 5}, trans_b, 2.0, 0.25, false, ++salt);
  }
}

TEST_P(GemmOp, EmptyInnerDimensionGivesBetaC) {
  const Impl impl = GetParam();
  IGNIS_SKIP_UNLESS(impl, gemm_supported(impl.device, impl.dtype));
  check_gemm(impl, {2, 3, 5, 0}, false, 1.0, 0.0, true, 400);
  check_gemm(impl, {2, 3, 5, 0}, true, 1.0, 0.5, true, 401);
}

TEST_P(GemmOp, RejectsBadArguments) {
  const Impl impl = GetParam();
  IGNIS_SKIP_UNLESS(impl, gemm_supported(impl.device, impl.dtype));
  auto make = [&](const Shape& shape) { return test::make_poisoned(shape, impl.dtype, impl.device); };
  Tensor a = make({2, 4, 8}), b = make({2, 8, 5}), c = make({2, 4, 5});
  EXPECT_ERROR_CONTAINS(gemm_nn(a, make({2, 7, 5}), c), "gemm_nn: b.shape");  // k mismatch
  EXPECT_ERROR_CONTAINS(gemm_nn(a, b, make({2, 4, 6})), "gemm_nn: c.shape");
  EXPECT_ERROR_CONTAINS(gemm_nn(a, make({3, 8, 5}), c), "gemm_nn: b.shape");  // batch mismatch
  EXPECT_ERROR_CONTAINS(gemm_nn(a, make({8, 5}), c), "gemm_nn: b.dim");  // mixed ranks
  EXPECT_ERROR_CONTAINS(gemm_nn(make({32}), make({32}), make({1})), "gemm_nn: a.dim");
  EXPECT_ERROR_CONTAINS(gemm_nt(a, b, c), "gemm_nt: b.shape");
  const DType other = impl.dtype == DType::f32 ? DType::f64 : DType::f32;
  EXPECT_ERROR_CONTAINS(gemm_nn(a, b, test::make_poisoned({2, 4, 5}, other, impl.device)), "gemm_nn: c.dtype");
  Tensor strided = Tensor::view(a.data(), impl.dtype, impl.device, {2, 4, 4}, {32, 8, 2});
  EXPECT_ERROR_CONTAINS(gemm_nn(strided, make({2, 4, 5}), c), "gemm_nn: a.strides");
  if (impl.device.is_cuda()) EXPECT_ERROR_CONTAINS(gemm_nn(a, b.to(Device::cpu()), c), "gemm_nn: b.device");
  try {
    gemm_nn(a, make({2, 7, 5}), c);
  } catch (const Error& e) {
    EXPECT_STREQ(e.what(), "gemm_nn: b.shape: expected [2, 8, 5], got [2, 7, 5]");
  }
}

TEST(GemmOp, RejectsUnsupportedDtype) {
  EXPECT_FALSE(gemm_supported(Device::cpu(), DType::i32));
  Tensor x = test::make_poisoned({2, 2}, DType::i32, Device::cpu());
  EXPECT_ERROR_CONTAINS(gemm_nn(x, x, x), "gemm_nn: dtype on cpu");
}

INSTANTIATE_TEST_SUITE_P(Impls, GemmOp, testing::ValuesIn(test::all_impls()), test::impl_param_name);

}  // namespace
}  // namespace ignis
