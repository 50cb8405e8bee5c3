#pragma once
// Host-side bf16 and fp16 storage types with conversions that match the GPU bit for bit:
// float -> half/bf16 rounds to nearest, ties to even (cvt.rn), keeps subnormals (fp16),
// overflows to infinity, and turns every NaN into the canonical quiet NaN 0x7FFF.
// half/bf16 -> float is exact.
#include <cstdint>
#include <cstring>

namespace ignis {

inline std::uint32_t float_bits(float f) {
  std::uint32_t u;
  std::memcpy(&u, &f, 4);
  return u;
}

inline float bits_float(std::uint32_t u) {
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}

inline std::uint16_t float_to_bf16_bits(float f) {
  const std::uint32_t u = float_bits(f);
  if ((u & 0x7fffffffu) > 0x7f800000u) return 0x7fff;  // NaN
  // Adding 0x7fff plus the lowest kept bit rounds to nearest with ties to even; a carry
  // out of the mantissa correctly bumps the exponent (and rounds FLT_MAX up to inf).
  const std::uint32_t lsb = (u >> 16) & 1u;
  return static_cast<std::uint16_t>((u + 0x7fffu + lsb) >> 16);
}

inline float bf16_bits_to_float(std::uint16_t b) { return bits_float(static_cast<std::uint32_t>(b) << 16); }

inline std::uint16_t float_to_f16_bits(float f) {
  const std::uint32_t u = float_bits(f);
  const std::uint16_t sign = static_cast<std::uint16_t>((u >> 16) & 0x8000u);
  const std::uint32_t abs = u & 0x7fffffffu;
  if (abs > 0x7f800000u) return 0x7fff;                     // NaN
  if (abs >= 0x477ff000u) return sign | 0x7c00u;           // rounds to >= 65520: infinity
  const int exp = static_cast<int>(abs >> 23) - 127;       // unbiased float exponent
  std::uint32_t mant = (abs & 0x7fffffu) | 0x800000u;      // with the implicit bit
  if (abs < 0x33000000u) return sign;                      // below half the smallest subnormal
  // fp16 normals have exponents -14..15; below that the value becomes subnormal and loses
  // one more mantissa bit per step. shift = bits dropped from the 24-bit mantissa.
  const int shift = exp >= -14 ? 13 : 13 + (-14 - exp);
  const std::uint32_t kept = mant >> shift;
  const std::uint32_t rest = mant & ((1u << shift) - 1u);
  const std::uint32_t half = 1u << (shift - 1);
  std::uint32_t rounded = kept + ((rest > half || (rest == half && (kept & 1u))) ? 1u : 0u);
  std::uint32_t bits;
  if (exp >= -14) {
    // rounded holds 1.mantissa in 11 bits; a carry to 12 bits is handled by the addition.
    bits = (static_cast<std::uint32_t>(exp + 15) << 10) + (rounded - 0x400u);
  } else {
    bits = rounded;  // subnormal; a carry into bit 10 yields the smallest normal, as it should
  }
  return static_cast<std::uint16_t>(sign | bits);
}

inline float f16_bits_to_float(std::uint16_t h) {
  const std::uint32_t sign = static_cast<std::uint32_t>(h & 0x8000u) << 16;
  const std::uint32_t exp = (h >> 10) & 0x1fu;
  const std::uint32_t mant = h & 0x3ffu;
  if (exp == 0x1f) return bits_float(sign | 0x7f800000u | (mant << 13));
  if (exp != 0) return bits_float(sign | ((exp + 112u) << 23) | (mant << 13));
  if (mant == 0) return bits_float(sign);
  // Subnormal: value = mant * 2^-24, exactly representable in float.
  const float magnitude = static_cast<float>(mant) * 5.9604644775390625e-8f;
  return (sign != 0u) ? -magnitude : magnitude;
}

// Storage wrappers so templates can tell the formats apart.
struct bf16 {
  std::uint16_t bits = 0;
  bf16() = default;
  explicit bf16(float f) : bits(float_to_bf16_bits(f)) {}
  static bf16 from_bits(std::uint16_t b) {
    bf16 x;
    x.bits = b;
    return x;
  }
  explicit operator float() const { return bf16_bits_to_float(bits); }
};

struct f16 {
  std::uint16_t bits = 0;
  f16() = default;
  explicit f16(float f) : bits(float_to_f16_bits(f)) {}
  static f16 from_bits(std::uint16_t b) {
    f16 x;
    x.bits = b;
    return x;
  }
  explicit operator float() const { return f16_bits_to_float(bits); }
};

}  // namespace ignis
