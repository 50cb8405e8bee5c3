#pragma once
// The integer arithmetic that makes sampling give the same ids on the CPU and on CUDA.
//
// Token weights are fixed-point integers: w_i = round(2^S * 2^-a_i) with
// a_i = (max - x_i) * log2(e) / T computed in double (one subtraction and one multiply, the same
// IEEE operations on both devices). 2^-a is a 256-entry table of 2^(-j/256) times a degree-4
// polynomial for the rest, evaluated with separately rounded IEEE double multiplies and adds (never
// fused: both paths round every operation the same way), so every implementation computes
// bit-identical weights. The table is made once on the host from integer arithmetic, so it does not
// depend on a math library. Sums of integers do not depend on the summation order, so a parallel
// prefix sum on the GPU and a sequential loop on the CPU agree exactly, and so do the top-p boundary
// and the sampled index. Against the real-valued rule (src/ref/sampling.h) a weight differs by at
// most 1e-15 relative plus 2^-1 absolute (the row max has weight 2^S), so a sum differs by at most
// 1e-15 + vocab^2 * 2^-64 of the row total: below 4e-9 for vocabularies up to 2^18.
// The CPU path (src/cpu/sampling.cpp) is compiled with -ffp-contract=off (src/CMakeLists.txt); a host file
// built without it may fuse a multiply and an add, and then only approximates these weights.
#include <array>
#include <cmath>
#include <cstdint>
#include <cstring>

#if defined(__CUDACC__)
#define IGNIS_HD __host__ __device__ __forceinline__
#else
#define IGNIS_HD inline
#endif

namespace ignis::sampling {

constexpr std::uint64_t kOneQ63 = std::uint64_t{1} << 63;
constexpr std::uint64_t kLn2Q63 = 6393154322601327830ull;  // round(ln 2 * 2^63)
constexpr double kLog2e = 1.4426950408889634;
constexpr int kExpTableSize = 256;
constexpr std::uint64_t kTopPOff = std::uint64_t{1} << 32;  // top-p fraction p * 2^32 meaning "keep all"

IGNIS_HD std::uint64_t mulhi64(std::uint64_t a, std::uint64_t b) {
#if defined(__CUDA_ARCH__)
  return __umul64hi(a, b);
#else
  __extension__ typedef unsigned __int128 u128;
  return static_cast<std::uint64_t>((static_cast<u128>(a) * b) >> 64);
#endif
}

// (a * b) >> s for 1 <= s <= 63, when the result fits 64 bits.
IGNIS_HD std::uint64_t mul_shift(std::uint64_t a, std::uint64_t b, int s) {
  return (mulhi64(a, b) << (64 - s)) | ((a * b) >> s);
}

// Product of two Q63 fixed-point numbers.
IGNIS_HD std::uint64_t mul_q63(std::uint64_t a, std::uint64_t b) { return mul_shift(a, b, 63); }

// 2^(-j/256) in Q63 for j in [0, 256): 20 Taylor terms of exp(-y), y = j/256 * ln 2 < 0.7.
IGNIS_HD std::uint64_t exp2_table_entry(int j) {
  const std::uint64_t y = mul_shift(kLn2Q63, static_cast<std::uint64_t>(j), 8);
  std::uint64_t q = kOneQ63;
  for (int k = 20; k >= 1; --k) q = kOneQ63 - mul_q63(y, q) / static_cast<std::uint64_t>(k);
  return q;
}

// The 256 entries as doubles (2^-j/256 rounded once), computed once on the host (kernels get a copy
// as a launch argument).
inline const double* exp2_table() {
  static const auto table = [] {
    std::array<double, kExpTableSize> t{};
    for (int j = 0; j < kExpTableSize; ++j) t[j] = std::ldexp(static_cast<double>(exp2_table_entry(j)), -63);
    return t;
  }();
  return table.data();
}

// The fractional bits S of a weight: the row max weighs 2^S and vocab * 2^S <= 2^63, so no sum overflows.
IGNIS_HD int weight_bits(std::int64_t vocab) {
  int log2_ceil = 0;
  while ((std::int64_t{1} << log2_ceil) < vocab) ++log2_ceil;
  const int s = 63 - log2_ceil;
  return s < 62 ? s : 62;
}

// IEEE double operations rounded once each: on CUDA the intrinsics keep nvcc from fusing a multiply
// and an add; on the host, src/cpu/sampling.cpp is compiled without contraction.
IGNIS_HD double mul_rn(double a, double b) {
#if defined(__CUDA_ARCH__)
  return __dmul_rn(a, b);
#else
  return a * b;
#endif
}
IGNIS_HD double add_rn(double a, double b) {
#if defined(__CUDA_ARCH__)
  return __dadd_rn(a, b);
#else
  return a + b;
#endif
}

// a = (max - x) * scale, scale = log2(e) / T; both operations rounded once in double.
IGNIS_HD double weight_exponent(float max, float x, double scale) {
  return mul_rn(add_rn(static_cast<double>(max), -static_cast<double>(x)), scale);
}

constexpr double kRoundToInteger = 6755399441055744.0;  // 1.5 * 2^52: t + it rounds t (|t| < 2^51) to an integer
constexpr double kLn2Over256 = 0.0027076061740622863;   // ln 2 / 256

// The integer held in the low 32 bits of a double made by adding kRoundToInteger.
IGNIS_HD std::int32_t low_word(double rounded) {
#if defined(__CUDA_ARCH__)
  return __double2loint(rounded);
#else
  std::uint64_t bits;
  std::memcpy(&bits, &rounded, sizeof bits);
  return static_cast<std::int32_t>(static_cast<std::uint32_t>(bits));
#endif
}

// 2^e for -1 <= e <= 62, exactly.
IGNIS_HD double power_of_two(int e) {
#if defined(__CUDA_ARCH__)
  return __hiloint2double((1023 + e) << 20, 0);
#else
  return std::ldexp(1.0, e);
#endif
}

// v >= 0, below 2^64, to the nearest integer (ties to even).
IGNIS_HD std::uint64_t round_to_u64(double v) {
#if defined(__CUDA_ARCH__)
  return __double2ull_rn(v);
#else
  return static_cast<std::uint64_t>(std::nearbyint(v));
#endif
}

// round(2^S * 2^-a) for a >= 0; 0 for a >= 64, NaN or +inf (a masked or -inf logit).
// 2^-a = 2^-(k / 256) * 2^-(r / 256) for the integer k nearest 256a and r = 256a - k in [-1/2, 1/2]:
// the first factor is the table entry times a power of two, the second exp(-z), z = r ln2 / 256,
// |z| < 0.0014, whose degree-4 Taylor polynomial is within 4e-17.
// table: [kExpTableSize], exp2_table().
IGNIS_HD std::uint64_t weight_from_exponent(double a, const double* table, int bits) {
  if (!(a >= 0.0 && a < 64.0)) return 0;
  const double t = mul_rn(a, 256.0);  // exact: a power-of-two scale
  const double rounded = add_rn(t, kRoundToInteger);
  const int k = low_word(rounded);
  const double r = add_rn(t, -add_rn(rounded, -kRoundToInteger));  // both exact
  const int e = bits - (k >> 8);
  if (e < -1) return 0;  // 2^S * 2^-a <= 2^(-2 + 1/512) rounds to 0
  const double z = mul_rn(r, kLn2Over256);
  double q = 1.0 / 24.0;
  q = add_rn(mul_rn(q, z), -1.0 / 6.0);
  q = add_rn(mul_rn(q, z), 0.5);
  q = add_rn(mul_rn(q, z), -1.0);
  q = add_rn(mul_rn(q, z), 1.0);  // exp(-z)
  return round_to_u64(mul_rn(mul_rn(table[k & (kExpTableSize - 1)], q), power_of_two(e)));
}

// An unsigned integer whose order is the order of the floats (with -0 == +0): keys compare as values do.
IGNIS_HD std::uint32_t order_key(float v) {
  if (v == 0.0f) v = 0.0f;
  std::uint32_t bits;
#if defined(__CUDA_ARCH__)
  bits = __float_as_uint(v);
#else
  std::memcpy(&bits, &v, sizeof bits);
#endif
  return (bits & 0x80000000u) ? ~bits : (bits | 0x80000000u);
}

// SplitMix64's finaliser: a bijection of 64-bit integers with good avalanche.
IGNIS_HD std::uint64_t mix64(std::uint64_t z) {
  z += 0x9E3779B97F4A7C15ull;
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

// The counter-based random word of one (seed, step, row); u = (bits >> 11) * 2^-53 in [0, 1).
IGNIS_HD std::uint64_t random_bits(std::uint64_t seed, std::uint64_t step, std::uint64_t row) {
  return mix64(mix64(mix64(seed) ^ step) ^ row);
}

// floor(u * total) for u = (bits >> 11) * 2^-53: in [0, total). The sample is the first index whose
// inclusive prefix sum of weights exceeds this threshold.
IGNIS_HD std::uint64_t draw_threshold(std::uint64_t bits, std::uint64_t total) {
  return mulhi64(bits & ~std::uint64_t{0x7ff}, total);
}

// p in (0, 1) rounded to 32 fractional bits and clamped to [1, 2^32]; p >= 1 gives kTopPOff.
inline std::uint64_t top_p_fixed(double p) {
  if (!(p < 1.0)) return kTopPOff;
  const auto q = static_cast<std::uint64_t>(p * 4294967296.0 + 0.5);
  return q == 0 ? 1 : (q > kTopPOff ? kTopPOff : q);
}

// ceil(total * p_fixed / 2^32), at least 1: the mass the top-p prefix must reach.
IGNIS_HD std::uint64_t top_p_target(std::uint64_t total, std::uint64_t p_fixed) {
  const std::uint64_t hi = mulhi64(total, p_fixed);
  const std::uint64_t lo = total * p_fixed;
  std::uint64_t target = (hi << 32) | (lo >> 32);
  if (lo & 0xffffffffu) ++target;
  return target == 0 ? 1 : target;
}

// Everything an implementation needs for one sampling call, derived on the host from the parameters.
struct Plan {
  bool greedy = false;            // temperature 0: argmax
  std::int64_t top_k = 0;         // 0: off
  std::uint64_t p_fixed = kTopPOff;
  double scale = kLog2e;          // log2(e) / T
  int bits = 62;                  // weight_bits(vocab)
  std::uint64_t seed = 0;
  std::uint64_t step = 0;
};

inline Plan make_plan(double temperature, std::int64_t top_k, double top_p, std::uint64_t seed, std::uint64_t step,
                      std::int64_t vocab) {
  Plan plan;
  plan.greedy = temperature == 0.0;
  plan.top_k = (top_k > 0 && top_k < vocab) ? top_k : 0;
  plan.p_fixed = top_p_fixed(top_p);
  plan.scale = plan.greedy ? kLog2e : kLog2e / temperature;
  plan.bits = weight_bits(vocab);
  plan.seed = seed;
  plan.step = step;
  return plan;
}

}  // namespace ignis::sampling
