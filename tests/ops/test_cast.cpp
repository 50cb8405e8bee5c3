// cast: every floating conversion on every device, bit-exact against the host conversion
// (which tests/core/test_float16.cpp ties to NVIDIA's own routines). On the GPU this checks
// that the hardware's cvt.rn agrees with ignis's host rounding.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>

#include "harness/op_harness.h"
#include "ignis/float16.h"
#include "ignis/ops.h"
#include "model/error_text.h"

namespace ignis {
namespace {

class CastOp : public testing::TestWithParam<Device> {};

TEST_P(CastOp, F32ToHalfAndBf16MatchesHostBitForBit) {
  const Device device = GetParam();
  if (device.is_cuda() && !cuda_available()) GTEST_SKIP() << "no usable GPU";
  std::mt19937 rng(11);
  const std::int64_t n = 1 << 20;
  Tensor host = Tensor::empty({n}, DType::f32);
  for (std::int64_t i = 0; i < n; ++i) host.data_as<std::uint32_t>()[i] = rng();  // any bit pattern, NaN too
  Tensor src = host.to(device);
  for (DType dst_type : {DType::f16, DType::bf16}) {
    Tensor dst = test::make_poisoned({n}, dst_type, device);
    cast(src, dst);
    Tensor back = dst.to(Device::cpu());
    for (std::int64_t i = 0; i < n; ++i) {
      const float f = host.data_as<float>()[i];
      const std::uint16_t expected = dst_type == DType::f16 ? float_to_f16_bits(f) : float_to_bf16_bits(f);
      ASSERT_EQ(back.data_as<std::uint16_t>()[i], expected)
          << dst_type << " element " << i << " float bits 0x" << std::hex << host.data_as<std::uint32_t>()[i];
    }
  }
}

TEST_P(CastOp, RoundTripsThroughEveryFloatingType) {
  const Device device = GetParam();
  if (device.is_cuda() && !cuda_available()) GTEST_SKIP() << "no usable GPU";
  auto rng = test::case_rng(5);
  const auto values = test::random_normal(rng, 1023, 100.0);
  for (DType from : {DType::f64, DType::f32, DType::f16, DType::bf16})
    for (DType to : {DType::f64, DType::f32, DType::f16, DType::bf16}) {
      const auto src_values = test::quantize(values, from);
      Tensor src = test::make_tensor(src_values, {1023}, from, device);
      Tensor dst = test::make_poisoned({1023}, to, device);
      cast(src, dst);
      const auto got = test::read_tensor(dst);
      const auto expected = test::quantize(src_values, to);
      for (std::size_t i = 0; i < got.size(); ++i)
        ASSERT_EQ(got[i], expected[i]) << from << " -> " << to << " at " << i;
    }
}

// The GPU kernel moves items of V = 16 / (narrower size) elements (8 for f32 -> bf16) with the
// rest (< V) done element by element, and falls back to single elements for operands that are
// not 16-byte aligned: sizes around those boundaries, one and several blocks of 128 items, views
// one element into an allocation.
TEST_P(CastOp, OddSizesTailsAndUnalignedViews) {
  const Device device = GetParam();
  if (device.is_cuda() && !cuda_available()) GTEST_SKIP() << "no usable GPU";
  std::uint64_t salt = 50;
  for (std::int64_t n : {1, 3, 7, 8, 9, 17, 113, 128 * 8 * 3 + 5})
    for (int offset : {0, 1})
      for (DType from : {DType::f64, DType::f32, DType::f16, DType::bf16})
        for (DType to : {DType::f64, DType::f32, DType::f16, DType::bf16}) {
          auto rng = test::case_rng(++salt);
          const auto values = test::quantize(test::random_normal(rng, n + offset, 100.0), from);
          Tensor src_all = test::make_tensor(values, {n + offset}, from, device);
          Tensor dst_all = test::make_poisoned({n + offset}, to, device);
          Tensor src = Tensor::view(static_cast<char*>(src_all.data()) + offset * dtype_size(from), from, device, {n});
          Tensor dst = Tensor::view(static_cast<char*>(dst_all.data()) + offset * dtype_size(to), to, device, {n});
          cast(src, dst);
          const auto got = test::read_tensor(dst_all);
          const auto expected = test::quantize(values, to);
          for (std::int64_t i = offset; i < n + offset; ++i)
            ASSERT_EQ(got[i], expected[i]) << from << " -> " << to << " n " << n << " offset " << offset << " at " << i;
          if (offset == 1) ASSERT_TRUE(std::isnan(got[0])) << "element before the view written";
        }
}

TEST(CastOpArgs, RejectsMismatches) {
  Tensor a = Tensor::empty({4}, DType::f32);
  Tensor b = Tensor::empty({5}, DType::f16);
  Tensor i = Tensor::empty({4}, DType::i32);
  EXPECT_ERROR_CONTAINS(cast(a, b), "cast: dst.shape");
  EXPECT_ERROR_CONTAINS(cast(a, i), "cast: dtypes");
}

INSTANTIATE_TEST_SUITE_P(Devices, CastOp, testing::Values(Device::cpu(), Device::cuda(0)),
                         [](const testing::TestParamInfo<Device>& info) {
                           return info.param.is_cpu() ? "cpu" : "cuda";
                         });

}  // namespace
}  // namespace ignis
