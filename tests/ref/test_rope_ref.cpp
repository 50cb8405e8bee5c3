// Reference RoPE: inverse frequencies of every scaling kind against hand-derived values and
// limiting identities; the rotation against a hand value, its inverse, its transpose (finite
// differences) and the equivalence of the two pair conventions. Also checks the public fp32
// rope_inv_freq against the fp64 reference.
#include <gtest/gtest.h>

#include <cmath>
#include <numbers>

#include "harness/finite_diff.h"
#include "harness/op_harness.h"
#include "ignis/ops/rope.h"
#include "model/error_text.h"
#include "ref/rope.h"

namespace ignis {
namespace {

constexpr double kPi = std::numbers::pi;

RopeScaling scaling_of(RopeScalingKind kind, double factor) {
  RopeScaling s;
  s.kind = kind;
  s.factor = factor;
  return s;
}

void expect_all_near(const std::vector<double>& got, const std::vector<double>& want, double rtol) {
  ASSERT_EQ(got.size(), want.size());
  for (std::size_t i = 0; i < got.size(); ++i) EXPECT_NEAR(got[i], want[i], rtol * std::abs(want[i])) << "pair " << i;
}

TEST(RefRope, InvFreqUnscaledHandValues) {
  // theta^(-2i/d): d = 4, theta = 100 -> [1, 1/10]; d = 6, theta = 1e6 -> [1, 1e-2, 1e-4].
  expect_all_near(ref::rope_inv_freq(4, 100.0, {}), {1.0, 0.1}, 1e-15);
  expect_all_near(ref::rope_inv_freq(6, 1e6, {}), {1.0, 1e-2, 1e-4}, 1e-14);
}

TEST(RefRope, InvFreqLinearHandValues) {
  expect_all_near(ref::rope_inv_freq(4, 100.0, scaling_of(RopeScalingKind::linear, 4.0)), {0.25, 0.025}, 1e-15);
}

TEST(RefRope, InvFreqNtkHandValues) {
  // d = 4: base = 100 * 4^(4/2) = 1600, inv_freq = [1, 1600^(-1/2)] = [1, 1/40].
  expect_all_near(ref::rope_inv_freq(4, 100.0, scaling_of(RopeScalingKind::ntk, 4.0)), {1.0, 0.025}, 1e-14);
  // In general the first frequency stays and the last is divided by factor.
  const auto unscaled = ref::rope_inv_freq(64, 10000.0, {});
  const auto ntk = ref::rope_inv_freq(64, 10000.0, scaling_of(RopeScalingKind::ntk, 8.0));
  EXPECT_DOUBLE_EQ(ntk.front(), 1.0);
  EXPECT_NEAR(ntk.back(), unscaled.back() / 8.0, 1e-12 * unscaled.back());
  for (std::size_t i = 1; i < ntk.size(); ++i) EXPECT_LT(ntk[i], unscaled[i]);
}

TEST(RefRope, InvFreqLlama3HandValues) {
  // Context 64, low/high freq factors 1/4: wavelengths above 64 are scaled, below 16 are kept.
  // d = 6, theta = 100: freqs 1 (wavelength 6.3), 100^(-1/3) (29.2, blended), 100^(-2/3) (135, scaled).
  RopeScaling s = scaling_of(RopeScalingKind::llama3, 8.0);
  s.original_max_position_embeddings = 64;
  s.low_freq_factor = 1.0;
  s.high_freq_factor = 4.0;
  const double f1 = std::pow(100.0, -1.0 / 3.0), f2 = std::pow(100.0, -2.0 / 3.0);
  const double smooth = (64.0 * f1 / (2.0 * kPi) - 1.0) / 3.0;  // context / wavelength, mapped to [0, 1]
  ASSERT_GT(smooth, 0.0);
  ASSERT_LT(smooth, 1.0);
  expect_all_near(ref::rope_inv_freq(6, 100.0, s), {1.0, (1.0 - smooth) * f1 / 8.0 + smooth * f1, f2 / 8.0}, 1e-14);
}

TEST(RefRope, InvFreqLlama3KeepsHighAndScalesLowFrequencies) {
  // Llama 3.1's own configuration.
  RopeScaling s = scaling_of(RopeScalingKind::llama3, 8.0);
  s.original_max_position_embeddings = 8192;
  const auto unscaled = ref::rope_inv_freq(128, 500000.0, {});
  const auto scaled = ref::rope_inv_freq(128, 500000.0, s);
  int kept = 0, divided = 0, blended = 0;
  for (std::size_t i = 0; i < scaled.size(); ++i) {
    const double wavelength = 2.0 * kPi / unscaled[i];
    if (wavelength < 8192.0 / 4.0) {
      EXPECT_EQ(scaled[i], unscaled[i]) << "pair " << i;
      ++kept;
    } else if (wavelength > 8192.0) {
      EXPECT_NEAR(scaled[i], unscaled[i] / 8.0, 1e-15 * unscaled[i]) << "pair " << i;
      ++divided;
    } else {
      EXPECT_LE(scaled[i], unscaled[i]);
      EXPECT_GE(scaled[i], unscaled[i] / 8.0);
      ++blended;
    }
  }
  EXPECT_GT(kept, 0);
  EXPECT_GT(divided, 0);
  EXPECT_GT(blended, 0);
}

TEST(RefRope, InvFreqYarnHandValues) {
  // d = 8, theta = 1e4: freqs 10^-i. Context 4096: c(32) = 8 ln(4096 / 64pi) / (2 ln 1e4) = 1.31 -> low 1,
  // c(1) = 8 ln(4096 / 2pi) / (2 ln 1e4) = 2.81 -> high 3; ramp(i) = clamp((i - 1) / 2, 0, 1) = [0, 0, 1/2, 1].
  RopeScaling s = scaling_of(RopeScalingKind::yarn, 4.0);
  s.original_max_position_embeddings = 4096;
  expect_all_near(ref::rope_inv_freq(8, 10000.0, s), {1.0, 0.1, 0.01 * (0.5 + 0.5 / 4.0), 0.001 / 4.0}, 1e-13);
  EXPECT_NEAR(ref::rope_attention_factor(s), 0.1 * std::log(4.0) + 1.0, 1e-15);
  EXPECT_NEAR(ref::rope_attention_factor(s), 1.1386294361119891, 1e-15);  // Python: 0.1 * math.log(4.0) + 1.0
}

TEST(RefRope, FactorOneIsUnscaled) {
  const auto unscaled = ref::rope_inv_freq(96, 10000.0, {});
  for (auto kind : {RopeScalingKind::linear, RopeScalingKind::ntk, RopeScalingKind::llama3, RopeScalingKind::yarn}) {
    const RopeScaling s = scaling_of(kind, 1.0);
    expect_all_near(ref::rope_inv_freq(96, 10000.0, s), unscaled, 1e-14);
    EXPECT_EQ(ref::rope_attention_factor(s), 1.0);
  }
}

TEST(RefRope, PublicInvFreqMatchesReference) {
  std::vector<RopeScaling> cases = {{}, scaling_of(RopeScalingKind::linear, 2.5), scaling_of(RopeScalingKind::ntk, 4.0),
                                    scaling_of(RopeScalingKind::llama3, 8.0), scaling_of(RopeScalingKind::yarn, 16.0)};
  cases[4].original_max_position_embeddings = 4096;
  for (const RopeScaling& s : cases)
    for (std::int64_t d : {8, 64, 128}) {
      SCOPED_TRACE(testing::Message() << "kind " << static_cast<int>(s.kind) << " d " << d);
      const auto want = ref::rope_inv_freq(d, 500000.0, s);
      const auto got = rope_inv_freq(d, 500000.0, s);
      ASSERT_EQ(got.size(), want.size());
      // One rounding to fp32 (half an ulp) plus pow's last-bit differences.
      for (std::size_t i = 0; i < got.size(); ++i) EXPECT_NEAR(got[i], want[i], 1.2e-7 * want[i]) << "pair " << i;
      EXPECT_FLOAT_EQ(rope_attention_factor(s), static_cast<float>(ref::rope_attention_factor(s)));
    }
}

TEST(RefRope, PublicInvFreqRejectsBadArguments) {
  EXPECT_ERROR_CONTAINS(rope_inv_freq(7, 10000.0), "rope_inv_freq: rotary_dim");
  EXPECT_ERROR_CONTAINS(rope_inv_freq(0, 10000.0), "rope_inv_freq: rotary_dim");
  EXPECT_ERROR_CONTAINS(rope_inv_freq(8, 0.0), "rope_inv_freq: theta");
  EXPECT_ERROR_CONTAINS(rope_inv_freq(2, 10000.0, scaling_of(RopeScalingKind::ntk, 2.0)),
                        "rope_inv_freq: rotary_dim (ntk)");
  EXPECT_ERROR_CONTAINS(rope_inv_freq(8, 10000.0, scaling_of(RopeScalingKind::linear, 0.0)),
                        "rope_inv_freq: scaling.factor");
  RopeScaling llama = scaling_of(RopeScalingKind::llama3, 8.0);
  llama.high_freq_factor = llama.low_freq_factor;
  EXPECT_ERROR_CONTAINS(rope_inv_freq(8, 10000.0, llama), "rope_inv_freq: scaling.high_freq_factor");
  RopeScaling yarn = scaling_of(RopeScalingKind::yarn, 4.0);
  yarn.original_max_position_embeddings = 0;
  EXPECT_ERROR_CONTAINS(rope_inv_freq(8, 10000.0, yarn), "rope_inv_freq: scaling.original_max_position_embeddings");
  try {
    rope_inv_freq(7, 10000.0);
  } catch (const Error& e) {
    EXPECT_STREQ(e.what(), "rope_inv_freq: rotary_dim: expected positive and even, got 7");
  }
}

// ---- The rotation ----

TEST(RefRope, OnePairHandValue) {
  // Token 1 of a sequence starting at 0, inv_freq 0.5: (2, 3) rotated by 0.5 rad.
  const ref::RopeDims dims{1, 2, 1, 2, 2, false};
  const std::vector<double> x = {7.0, -1.0, 2.0, 3.0};
  const std::vector<std::int64_t> start = {0};
  const auto y = ref::rope_apply(x, std::vector<double>{0.5}, dims, start, 1.0, 1);
  EXPECT_DOUBLE_EQ(y[0], 7.0) << "position 0 is the identity";
  EXPECT_DOUBLE_EQ(y[1], -1.0);
  EXPECT_NEAR(y[2], 2.0 * std::cos(0.5) - 3.0 * std::sin(0.5), 1e-15);
  EXPECT_NEAR(y[3], 3.0 * std::cos(0.5) + 2.0 * std::sin(0.5), 1e-15);
  // A quarter turn: (2, 3) -> (-3, 2); the backward turns the other way: (2, 3) -> (3, -2).
  const auto quarter = ref::rope_apply(x, std::vector<double>{kPi / 2}, dims, start, 1.0, 1);
  EXPECT_NEAR(quarter[2], -3.0, 1e-15);
  EXPECT_NEAR(quarter[3], 2.0, 1e-15);
  const auto back = ref::rope_apply(x, std::vector<double>{kPi / 2}, dims, start, 1.0, -1);
  EXPECT_NEAR(back[2], 3.0, 1e-15);
  EXPECT_NEAR(back[3], -2.0, 1e-15);
}

TEST(RefRope, PassThroughDimsAndAttentionFactor) {
  // head_dim 5, rotary_dim 2: dims 2..4 are copied; the pair is scaled by the attention factor.
  const ref::RopeDims dims{1, 1, 1, 5, 2, false};
  const std::vector<double> x = {1.0, 2.0, 3.0, 4.0, 5.0};
  const std::vector<std::int64_t> start = {3};
  const auto y = ref::rope_apply(x, std::vector<double>{0.25}, dims, start, 1.5, 1);
  EXPECT_NEAR(y[0], 1.5 * (std::cos(0.75) - 2.0 * std::sin(0.75)), 1e-15);
  EXPECT_NEAR(y[1], 1.5 * (2.0 * std::cos(0.75) + std::sin(0.75)), 1e-15);
  EXPECT_EQ(y[2], 3.0);
  EXPECT_EQ(y[3], 4.0);
  EXPECT_EQ(y[4], 5.0);
}

struct Case {
  ref::RopeDims dims;
  std::vector<double> x, inv_freq;
  std::vector<std::int64_t> start;
};

Case random_case(std::uint64_t salt, bool interleaved) {
  auto rng = test::case_rng(salt);
  Case c;
  c.dims = {2, 3, 2, 10, 6, interleaved};
  c.x = test::random_normal(rng, 2 * 3 * 2 * 10);
  c.inv_freq = ref::rope_inv_freq(6, 100.0, {});
  c.start = {0, 1000};
  return c;
}

TEST(RefRope, BackwardInvertsForward) {
  for (bool interleaved : {false, true}) {
    const Case c = random_case(10 + interleaved, interleaved);
    const auto y = ref::rope_apply(c.x, c.inv_freq, c.dims, c.start, 1.0, 1);
    const auto back = ref::rope_apply(y, c.inv_freq, c.dims, c.start, 1.0, -1);
    for (std::size_t i = 0; i < c.x.size(); ++i) EXPECT_NEAR(back[i], c.x[i], 1e-14) << i;
    // With an attention factor f, backward(forward(x)) = f^2 x.
    const auto yf = ref::rope_apply(c.x, c.inv_freq, c.dims, c.start, 1.25, 1);
    const auto backf = ref::rope_apply(yf, c.inv_freq, c.dims, c.start, 1.25, -1);
    const double f2 = 1.25 * 1.25;
    for (std::size_t i = 0; i < c.x.size(); ++i) {
      const bool rotated = static_cast<std::int64_t>(i) % c.dims.head_dim < c.dims.rotary_dim;
      EXPECT_NEAR(backf[i], rotated ? f2 * c.x[i] : c.x[i], 1e-14) << i;
    }
  }
}

TEST(RefRope, BackwardMatchesFiniteDifferences) {
  for (bool interleaved : {false, true}) {
    const Case c = random_case(20 + interleaved, interleaved);
    auto rng = test::case_rng(30 + interleaved);
    const auto g = test::random_normal(rng, c.x.size());
    const double factor = 1.3;
    const auto analytic = ref::rope_apply(g, c.inv_freq, c.dims, c.start, factor, -1);
    const auto numeric = test::numeric_vjp(
        [&](const std::vector<double>& at) { return ref::rope_apply(at, c.inv_freq, c.dims, c.start, factor, 1); },
        c.x, g);
    EXPECT_LT(test::max_rel_diff(analytic, numeric), 1e-8) << "interleaved " << interleaved;
  }
}

TEST(RefRope, ConventionsAgreeAfterPermutingDims) {
  // Interleaved pair (2i, 2i+1) holds what rotate-half keeps at (i, i + rotary_dim/2).
  const Case c = random_case(40, false);
  const std::int64_t hd = c.dims.head_dim, half = c.dims.rotary_dim / 2;
  auto to_interleaved = [&](const std::vector<double>& v) {
    std::vector<double> out = v;
    for (std::size_t row = 0; row < v.size(); row += hd)
      for (std::int64_t i = 0; i < half; ++i) {
        out[row + 2 * i] = v[row + i];
        out[row + 2 * i + 1] = v[row + i + half];
      }
    return out;
  };
  ref::RopeDims inter = c.dims;
  inter.interleaved = true;
  const auto half_style = ref::rope_apply(c.x, c.inv_freq, c.dims, c.start, 1.0, 1);
  const auto inter_style = ref::rope_apply(to_interleaved(c.x), c.inv_freq, inter, c.start, 1.0, 1);
  const auto want = to_interleaved(half_style);
  for (std::size_t i = 0; i < want.size(); ++i) EXPECT_NEAR(inter_style[i], want[i], 1e-15) << i;
}

TEST(RefRope, DotProductDependsOnlyOnRelativePosition) {
  // <R(m) q, R(n) k> is a function of m - n: shifting both positions changes nothing.
  auto rng = test::case_rng(50);
  const ref::RopeDims dims{1, 1, 1, 16, 16, false};
  const auto q = test::random_normal(rng, 16), k = test::random_normal(rng, 16);
  const auto inv_freq = ref::rope_inv_freq(16, 10000.0, {});
  auto dot_at = [&](std::int64_t m, std::int64_t n) {
    const auto rq = ref::rope_apply(q, inv_freq, dims, std::vector<std::int64_t>{m}, 1.0, 1);
    const auto rk = ref::rope_apply(k, inv_freq, dims, std::vector<std::int64_t>{n}, 1.0, 1);
    double d = 0.0;
    for (int i = 0; i < 16; ++i) d += rq[i] * rk[i];
    return d;
  };
  EXPECT_NEAR(dot_at(9, 4), dot_at(5, 0), 1e-12);
  EXPECT_NEAR(dot_at(1003, 998), dot_at(5, 0), 1e-11);
}

}  // namespace
}  // namespace ignis
