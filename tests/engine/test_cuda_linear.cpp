// CublasLt::linear against a double-precision product on the host: f32 and bf16 weights, one row
// (decode) and several (prefill), with and without a bias, overwriting and accumulating (beta = 1).
// Skipped without a GPU.
#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <vector>

#include "engine/cuda_linear.h"
#include "harness/op_harness.h"
#include "ignis/device.h"
#include "ignis/stream.h"
#include "model/error_text.h"

namespace ignis::engine {
namespace {

void check_linear(DType dtype, std::int64_t m, std::int64_t out, std::int64_t in, bool with_bias, bool accumulate,
                  std::uint64_t salt) {
  SCOPED_TRACE(testing::Message() << dtype << " m " << m << " out " << out << " in " << in
                                  << (with_bias ? " bias" : "") << (accumulate ? " beta 1" : " beta 0"));
  auto rng = test::case_rng(salt);
  const auto w = test::quantize(test::random_normal(rng, static_cast<std::size_t>(out * in)), dtype);
  const auto x = test::quantize(test::random_normal(rng, static_cast<std::size_t>(m * in)), dtype);
  const auto b = test::random_normal(rng, static_cast<std::size_t>(out));
  const auto y0 = test::random_normal(rng, static_cast<std::size_t>(m * out));
  const Device dev = Device::cuda(0);
  const Tensor tw = test::make_tensor(w, {out, in}, dtype, dev);
  const Tensor tx = test::make_tensor(x, {m, in}, dtype, dev);
  const Tensor tb = test::make_tensor(b, {out}, DType::f32, dev);
  const Tensor ty =
      accumulate ? test::make_tensor(y0, {m, out}, DType::f32, dev) : test::make_poisoned({m, out}, DType::f32, dev);
  CublasLt lt(dev);
  lt.linear(tw, tx.data(), ty.data_as<float>(), m, accumulate ? 1.0f : 0.0f, Stream{}, with_bias ? &tb : nullptr);
  synchronize();

  std::vector<double> want(static_cast<std::size_t>(m * out));
  for (std::int64_t r = 0; r < m; ++r)
    for (std::int64_t o = 0; o < out; ++o) {
      double sum = 0.0;
      for (std::int64_t i = 0; i < in; ++i)
        sum += x[static_cast<std::size_t>(r * in + i)] * w[static_cast<std::size_t>(o * in + i)];
      if (with_bias) sum += static_cast<float>(b[static_cast<std::size_t>(o)]);
      if (accumulate) sum += static_cast<float>(y0[static_cast<std::size_t>(r * out + o)]);
      want[static_cast<std::size_t>(r * out + o)] = sum;
    }
  // fp32 accumulation over `in` products of unit-size values.
  EXPECT_TRUE(test::close_to_reference(test::read_tensor(ty), want, DType::f32, {}, 1e-5, 1e-5,
                                       std::sqrt(static_cast<double>(in))));
}

TEST(CudaLinear, BiasAndAccumulateMatchTheHostProduct) {
  if (!cuda_available()) GTEST_SKIP() << "no CUDA GPU";
  std::uint64_t salt = 900;
  for (DType dtype : {DType::f32, DType::bf16})
    for (std::int64_t m : {1, 5})
      for (bool bias : {false, true})
        for (bool accumulate : {false, true}) check_linear(dtype, m, 48, 16, bias, accumulate, ++salt);
  check_linear(DType::f32, 3, 37, 24, true, true, ++salt);    // odd widths
  check_linear(DType::bf16, 7, 768, 256, true, false, ++salt);
}

TEST(CudaLinear, RejectsABadBias) {
  if (!cuda_available()) GTEST_SKIP() << "no CUDA GPU";
  const Device dev = Device::cuda(0);
  CublasLt lt(dev);
  const Tensor w = test::make_poisoned({8, 4}, DType::f32, dev);
  const Tensor x = test::make_poisoned({1, 4}, DType::f32, dev);
  const Tensor y = test::make_poisoned({1, 8}, DType::f32, dev);
  const Tensor short_bias = test::make_poisoned({7}, DType::f32, dev);
  const Tensor bf16_bias = test::make_poisoned({8}, DType::bf16, dev);
  const Tensor host_bias = test::make_poisoned({8}, DType::f32, Device::cpu());
  const auto linear_with = [&](const Tensor& bias) { lt.linear(w, x.data(), y.data_as<float>(), 1, 0.0f, {}, &bias); };
  EXPECT_ERROR_CONTAINS(linear_with(short_bias), "CublasLt::linear: bias.shape");
  EXPECT_ERROR_CONTAINS(linear_with(bf16_bias), "CublasLt::linear: bias.dtype");
  EXPECT_ERROR_CONTAINS(linear_with(host_bias), "CublasLt::linear: bias.device");
}

}  // namespace
}  // namespace ignis::engine
