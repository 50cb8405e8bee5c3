// bf16/fp16 conversions: hand-derived bit patterns, and agreement with NVIDIA's own host-side
// conversion routines (cuda_bf16.h / cuda_fp16.h, an independent implementation) on millions
// of random float bit patterns. tests/ops/test_cast.cpp checks the same on the GPU hardware.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <random>

#include "ignis/float16.h"

#if IGNIS_WITH_CUDA
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#endif

namespace ignis {
namespace {

TEST(Float16, Bf16HandValues) {
  EXPECT_EQ(float_to_bf16_bits(1.0f), 0x3f80);
  EXPECT_EQ(float_to_bf16_bits(-2.0f), 0xc000);
  // 1 + 2^-8 lies exactly between 1 and 1 + 2^-7: ties to even keeps 1.
  EXPECT_EQ(float_to_bf16_bits(1.0f + 0x1p-8f), 0x3f80);
  // 1 + 3*2^-8 lies between 1 + 2^-7 (odd) and 1 + 2^-6 (even): rounds up to even.
  EXPECT_EQ(float_to_bf16_bits(1.0f + 3 * 0x1p-8f), 0x3f82);
  EXPECT_EQ(float_to_bf16_bits(1.0f + 0x1p-8f + 0x1p-20f), 0x3f81);  // above the tie: up
  EXPECT_EQ(float_to_bf16_bits(std::numeric_limits<float>::max()), 0x7f80);  // rounds to +inf
  EXPECT_EQ(float_to_bf16_bits(std::numeric_limits<float>::infinity()), 0x7f80);
  EXPECT_EQ(float_to_bf16_bits(std::nanf("")), 0x7fff);
  EXPECT_EQ(float_to_bf16_bits(-0.0f), 0x8000);
  EXPECT_EQ(bf16_bits_to_float(0x3f81), 1.0f + 0x1p-7f);
}

TEST(Float16, F16HandValues) {
  EXPECT_EQ(float_to_f16_bits(1.0f), 0x3c00);
  EXPECT_EQ(float_to_f16_bits(-2.0f), 0xc000);
  EXPECT_EQ(float_to_f16_bits(65504.0f), 0x7bff);   // largest finite
  EXPECT_EQ(float_to_f16_bits(65519.0f), 0x7bff);   // below the halfway point to 65536
  EXPECT_EQ(float_to_f16_bits(65520.0f), 0x7c00);   // the tie rounds to even: infinity
  EXPECT_EQ(float_to_f16_bits(0x1p-24f), 0x0001);   // smallest subnormal
  EXPECT_EQ(float_to_f16_bits(0x1p-25f), 0x0000);   // tie between 0 and 2^-24: even is 0
  EXPECT_EQ(float_to_f16_bits(0x1.8p-24f), 0x0002);  // 1.5 * 2^-24: tie, rounds to even 2
  EXPECT_EQ(float_to_f16_bits(0x1p-14f), 0x0400);   // smallest normal
  EXPECT_EQ(float_to_f16_bits(0x1.ff8p-15f), 0x03ff);  // largest subnormal, 1023 * 2^-24
  EXPECT_EQ(float_to_f16_bits(1.0f + 0x1p-11f), 0x3c00);  // tie to even
  EXPECT_EQ(float_to_f16_bits(1.0f + 3 * 0x1p-11f), 0x3c02);
  EXPECT_EQ(float_to_f16_bits(std::nanf("")), 0x7fff);
  EXPECT_EQ(f16_bits_to_float(0x0001), 0x1p-24f);
  EXPECT_EQ(f16_bits_to_float(0x7c00), std::numeric_limits<float>::infinity());
  EXPECT_EQ(f16_bits_to_float(0xbc00), -1.0f);
}

TEST(Float16, RoundTripsEveryHalfAndBf16) {
  for (std::uint32_t bits = 0; bits <= 0xffff; ++bits) {
    const auto b = static_cast<std::uint16_t>(bits);
    const bool f16_nan = (b & 0x7c00) == 0x7c00 && (b & 0x3ff) != 0;
    if (!f16_nan) EXPECT_EQ(float_to_f16_bits(f16_bits_to_float(b)), b);
    const bool bf16_nan = (b & 0x7f80) == 0x7f80 && (b & 0x7f) != 0;
    if (!bf16_nan) EXPECT_EQ(float_to_bf16_bits(bf16_bits_to_float(b)), b);
  }
}

#if IGNIS_WITH_CUDA
std::uint16_t nvidia_bf16_bits(float f) {
  const __nv_bfloat16 h = __float2bfloat16_rn(f);
  return __bfloat16_as_ushort(h);
}
std::uint16_t nvidia_f16_bits(float f) {
  const __half h = __float2half_rn(f);
  return __half_as_ushort(h);
}

TEST(Float16, MatchesNvidiaHostConversionOnRandomBits) {
  std::mt19937 rng(7);
  for (int i = 0; i < 4'000'000; ++i) {
    const std::uint32_t bits = rng();
    const float f = bits_float(bits);
    ASSERT_EQ(float_to_bf16_bits(f), nvidia_bf16_bits(f)) << std::hex << "float bits 0x" << bits;
    ASSERT_EQ(float_to_f16_bits(f), nvidia_f16_bits(f)) << std::hex << "float bits 0x" << bits;
  }
}

TEST(Float16, MatchesNvidiaHostConversionNearHalfRange) {
  // Every seventh float in [2^-26, 2^17): all fp16 subnormals, normals and the overflow edge. 7 is prime
  // to 2^13, so every pattern of the 13 low bits that the conversion drops, ties included, occurs at
  // every exponent (about 150 times each).
  for (std::uint32_t bits = 0x32800000u; bits < 0x48000000u; bits += 7) {
    const float f = bits_float(bits);
    ASSERT_EQ(float_to_f16_bits(f), nvidia_f16_bits(f)) << std::hex << "float bits 0x" << bits;
    ASSERT_EQ(float_to_f16_bits(-f), nvidia_f16_bits(-f)) << std::hex << "float bits 0x" << bits;
  }
}
#endif

}  // namespace
}  // namespace ignis
