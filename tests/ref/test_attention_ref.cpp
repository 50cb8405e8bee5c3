// Reference attention: hand values, GQA and mask identities against explicit key subsets, large
// logits, and every backward output against finite differences of the forward.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>

#include "harness/finite_diff.h"
#include "harness/op_harness.h"
#include "ignis/error.h"
#include "model/error_text.h"
#include "ref/attention.h"

namespace ignis {
namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();

ref::AttentionParams shape(std::int64_t batch, std::int64_t heads_q, std::int64_t heads_kv, std::int64_t seqlen_q,
                           std::int64_t seqlen_k, std::int64_t head_dim) {
  ref::AttentionParams p;
  p.batch = batch;
  p.heads_q = heads_q;
  p.heads_kv = heads_kv;
  p.seqlen_q = seqlen_q;
  p.seqlen_k = seqlen_k;
  p.head_dim = head_dim;
  p.scale = 1.0 / std::sqrt(static_cast<double>(head_dim));
  return p;
}

struct Inputs {
  std::vector<double> q, k, v;
};

Inputs random_inputs(const ref::AttentionParams& p, std::uint64_t salt, double stddev = 1.0) {
  auto rng = test::case_rng(salt);
  const auto q_size = static_cast<std::size_t>(p.batch * p.seqlen_q * p.heads_q * p.head_dim);
  const auto kv_size = static_cast<std::size_t>(p.batch * p.seqlen_k * p.heads_kv * p.head_dim);
  Inputs in;
  in.q = test::random_normal(rng, q_size, stddev);
  in.k = test::random_normal(rng, kv_size, stddev);
  in.v = test::random_normal(rng, kv_size);
  return in;
}

ref::AttentionForward forward(const Inputs& in, const ref::AttentionParams& p) {
  return ref::attention_forward(in.q, in.k, in.v, p);
}

// Row i of (batch 0, head h) computed as unmasked attention over an explicit list of keys.
ref::AttentionForward row_over_keys(const Inputs& in, const ref::AttentionParams& p, std::int64_t h, std::int64_t i,
                                    const std::vector<std::int64_t>& keys) {
  if (keys.empty()) return {std::vector<double>(p.head_dim, 0.0), {-kInf}};
  ref::AttentionParams one = shape(1, 1, 1, 1, static_cast<std::int64_t>(keys.size()), p.head_dim);
  one.scale = p.scale;
  one.softcap = p.softcap;
  const std::int64_t D = p.head_dim;
  const std::int64_t kv_head = h / (p.heads_q / p.heads_kv);
  Inputs sub;
  sub.q.assign(in.q.begin() + (i * p.heads_q + h) * D, in.q.begin() + (i * p.heads_q + h + 1) * D);
  for (std::int64_t j : keys) {
    const std::int64_t at = (j * p.heads_kv + kv_head) * D;
    sub.k.insert(sub.k.end(), in.k.begin() + at, in.k.begin() + at + D);
    sub.v.insert(sub.v.end(), in.v.begin() + at, in.v.begin() + at + D);
  }
  return forward(sub, one);
}

std::vector<std::int64_t> range(std::int64_t first, std::int64_t last) {
  std::vector<std::int64_t> r;
  for (std::int64_t j = first; j <= last; ++j) r.push_back(j);
  return r;
}

// Checks every row of batch 0 against its expected visible keys.
void expect_rows(const Inputs& in, const ref::AttentionParams& p,
                 const std::vector<std::vector<std::int64_t>>& visible) {
  ASSERT_EQ(static_cast<std::int64_t>(visible.size()), p.seqlen_q);
  const auto full = forward(in, p);
  for (std::int64_t h = 0; h < p.heads_q; ++h)
    for (std::int64_t i = 0; i < p.seqlen_q; ++i) {
      SCOPED_TRACE(testing::Message() << "head " << h << " row " << i);
      const auto row = row_over_keys(in, p, h, i, visible[i]);
      const double lse = full.lse[h * p.seqlen_q + i];
      if (visible[i].empty()) {
        EXPECT_EQ(lse, -kInf);
      } else {
        EXPECT_NEAR(lse, row.lse[0], 1e-13);
      }
      for (std::int64_t d = 0; d < p.head_dim; ++d) {
        const double o = full.o[(i * p.heads_q + h) * p.head_dim + d];
        if (visible[i].empty()) {
          EXPECT_EQ(o, 0.0) << "a fully masked row outputs 0, never NaN";
        } else {
          EXPECT_NEAR(o, row.o[d], 1e-13);
        }
      }
    }
}

TEST(RefAttention, OneKeyOutputsItsValue) {
  auto p = shape(1, 2, 1, 3, 1, 4);
  const Inputs in = random_inputs(p, 1);
  const auto out = forward(in, p);
  for (std::int64_t i = 0; i < 3; ++i)
    for (std::int64_t h = 0; h < 2; ++h) {
      const double s = p.scale * std::inner_product(in.k.begin(), in.k.end(), in.q.begin() + (i * 2 + h) * 4, 0.0);
      EXPECT_NEAR(out.lse[h * 3 + i], s, 1e-14) << "the lse of one key is its score";
      for (int d = 0; d < 4; ++d) EXPECT_NEAR(out.o[(i * 2 + h) * 4 + d], in.v[d], 1e-15);
    }
}

TEST(RefAttention, EqualScoresAverageTheValues) {
  auto p = shape(1, 1, 1, 2, 5, 3);
  Inputs in = random_inputs(p, 2);
  std::fill(in.q.begin(), in.q.end(), 0.0);  // every score is 0
  const auto out = forward(in, p);
  for (std::int64_t i = 0; i < 2; ++i) {
    EXPECT_NEAR(out.lse[i], std::log(5.0), 1e-15);
    for (int d = 0; d < 3; ++d) {
      double mean = 0.0;
      for (int j = 0; j < 5; ++j) mean += in.v[j * 3 + d] / 5.0;
      EXPECT_NEAR(out.o[i * 3 + d], mean, 1e-15);
    }
  }
}

TEST(RefAttention, KnownRow) {
  // Scores [0, ln 3]: weights [1/4, 3/4], lse = ln(1 + 3) = ln 4.
  auto p = shape(1, 1, 1, 1, 2, 2);
  p.scale = 1.0;
  const Inputs in{{1.0, 0.0}, {0.0, 5.0, std::log(3.0), -2.0}, {4.0, 8.0, 0.0, -4.0}};
  const auto out = forward(in, p);
  EXPECT_NEAR(out.lse[0], std::log(4.0), 1e-15);
  EXPECT_NEAR(out.o[0], 1.0, 1e-15);
  EXPECT_NEAR(out.o[1], 2.0 - 3.0, 1e-15);
}

TEST(RefAttention, SoftcapHandValue) {
  // Raw scores [0, 10] with softcap 5 become [0, 5 tanh 2].
  auto p = shape(1, 1, 1, 1, 2, 1);
  p.scale = 1.0;
  p.softcap = 5.0;
  const Inputs in{{2.0}, {0.0, 5.0}, {1.0, -1.0}};
  const auto out = forward(in, p);
  const double s1 = 5.0 * std::tanh(2.0);
  const double w1 = std::exp(s1) / (1.0 + std::exp(s1));
  EXPECT_NEAR(out.lse[0], std::log(1.0 + std::exp(s1)), 1e-14);
  EXPECT_NEAR(out.o[0], (1.0 - w1) - w1, 1e-14);
  // A very large cap leaves the scores unchanged.
  p.softcap = 1e7;
  EXPECT_NEAR(forward(in, p).lse[0], std::log(1.0 + std::exp(10.0)), 1e-9);
}

TEST(RefAttention, GqaEqualsMhaWithRepeatedKvHeads) {
  const std::int64_t B = 2, Hkv = 2, ratio = 3, Hq = Hkv * ratio, Sq = 4, Sk = 5, D = 3;
  auto gqa = shape(B, Hq, Hkv, Sq, Sk, D);
  gqa.causal = true;
  const Inputs in = random_inputs(gqa, 3);
  auto mha = gqa;
  mha.heads_kv = Hq;
  Inputs repeated{in.q, {}, {}};
  for (std::int64_t b = 0; b < B; ++b)
    for (std::int64_t j = 0; j < Sk; ++j)
      for (std::int64_t h = 0; h < Hq; ++h) {
        const std::int64_t at = ((b * Sk + j) * Hkv + h / ratio) * D;
        repeated.k.insert(repeated.k.end(), in.k.begin() + at, in.k.begin() + at + D);
        repeated.v.insert(repeated.v.end(), in.v.begin() + at, in.v.begin() + at + D);
      }
  const auto a = forward(in, gqa);
  const auto b = forward(repeated, mha);
  EXPECT_EQ(a.o, b.o);
  EXPECT_EQ(a.lse, b.lse);
}

TEST(RefAttention, CausalIsBottomRightAligned) {
  {
    auto p = shape(1, 2, 1, 3, 5, 4);  // seqlen_q < seqlen_k: the last row sees every key
    p.causal = true;
    expect_rows(random_inputs(p, 4), p, {range(0, 2), range(0, 3), range(0, 4)});
  }
  {
    auto p = shape(1, 2, 2, 5, 3, 4);  // seqlen_q > seqlen_k: the first two rows see nothing
    p.causal = true;
    expect_rows(random_inputs(p, 5), p, {{}, {}, {0}, {0, 1}, {0, 1, 2}});
  }
}

TEST(RefAttention, SlidingWindow) {
  {
    auto p = shape(1, 1, 1, 6, 6, 3);
    p.window_left = 2;
    p.window_right = 1;
    expect_rows(random_inputs(p, 6), p, {range(0, 1), range(0, 2), range(0, 3), range(1, 4), range(2, 5), range(3, 5)});
  }
  {
    auto p = shape(1, 3, 1, 4, 6, 2);  // causal with a left window, diagonal shifted by 2
    p.causal = true;
    p.window_left = 1;
    expect_rows(random_inputs(p, 7), p, {range(1, 2), range(2, 3), range(3, 4), range(4, 5)});
  }
  {
    auto p = shape(1, 1, 1, 5, 3, 2);  // the diagonal leaves the key range: edge rows see nothing
    p.window_left = 0;
    p.window_right = 0;
    expect_rows(random_inputs(p, 8), p, {{}, {}, {0}, {1}, {2}});
  }
  {
    auto p = shape(1, 1, 1, 3, 7, 2);  // right window only
    p.window_right = 2;
    expect_rows(random_inputs(p, 9), p, {range(0, 6), range(0, 6), range(0, 6)});
    p.window_right = 0;
    p.window_left = -1;
    expect_rows(random_inputs(p, 10), p, {range(0, 4), range(0, 5), range(0, 6)});
  }
}

TEST(RefAttention, LargeLogitsStayFinite) {
  auto p = shape(2, 2, 1, 17, 17, 16);
  p.causal = true;
  const Inputs in = random_inputs(p, 11, 50.0);
  const auto out = forward(in, p);
  const auto [vmin, vmax] = std::minmax_element(in.v.begin(), in.v.end());
  for (double x : out.lse) EXPECT_TRUE(std::isfinite(x));
  for (double x : out.o) {
    EXPECT_TRUE(std::isfinite(x));
    EXPECT_GE(x, *vmin - 1e-12);  // a convex combination of the values
    EXPECT_LE(x, *vmax + 1e-12);
  }
}

TEST(RefAttention, BackwardOneKey) {
  // With one key every weight is 1: dv = sum of dout over the rows, dq = dk = 0.
  auto p = shape(1, 1, 1, 3, 1, 2);
  const Inputs in = random_inputs(p, 12);
  const auto fwd = forward(in, p);
  const std::vector<double> dout = {1.0, 2.0, 3.0, 4.0, 5.0, 6.0};
  const auto g = ref::attention_backward(in.q, in.k, in.v, fwd.o, dout, fwd.lse, p);
  EXPECT_NEAR(g.dv[0], 9.0, 1e-14);
  EXPECT_NEAR(g.dv[1], 12.0, 1e-14);
  for (double x : g.dq) EXPECT_NEAR(x, 0.0, 1e-14);
  for (double x : g.dk) EXPECT_NEAR(x, 0.0, 1e-14);
}

struct BackwardCase {
  const char* name;
  ref::AttentionParams p;
};

std::vector<BackwardCase> backward_cases() {
  std::vector<BackwardCase> cases;
  cases.push_back({"mha", shape(2, 2, 2, 3, 4, 5)});
  cases.push_back({"gqa", shape(1, 6, 2, 3, 3, 4)});
  auto causal_short_q = shape(1, 2, 1, 2, 5, 3);
  causal_short_q.causal = true;
  cases.push_back({"causal seqlen_q < seqlen_k", causal_short_q});
  auto causal_long_q = shape(2, 3, 3, 5, 3, 3);
  causal_long_q.causal = true;
  cases.push_back({"causal seqlen_q > seqlen_k", causal_long_q});
  auto window = shape(1, 2, 2, 6, 6, 3);
  window.window_left = 1;
  window.window_right = 2;
  cases.push_back({"window", window});
  auto softcap = shape(1, 2, 1, 4, 5, 4);
  softcap.softcap = 1.5;
  cases.push_back({"softcap", softcap});
  auto all = shape(2, 4, 2, 5, 7, 3);
  all.causal = true;
  all.window_left = 3;
  all.softcap = 2.0;
  cases.push_back({"gqa causal window softcap", all});
  return cases;
}

TEST(RefAttention, BackwardMatchesFiniteDifferences) {
  std::uint64_t salt = 100;
  for (const auto& c : backward_cases()) {
    SCOPED_TRACE(c.name);
    const auto& p = c.p;
    // stddev 2 makes scores large enough that the softcap bends them.
    const Inputs in = random_inputs(p, ++salt, 2.0);
    auto rng = test::case_rng(++salt);
    const auto dout = test::random_normal(rng, in.q.size());
    const auto fwd = forward(in, p);
    const auto g = ref::attention_backward(in.q, in.k, in.v, fwd.o, dout, fwd.lse, p);
    const auto dq = test::numeric_vjp([&](const auto& x) { return forward({x, in.k, in.v}, p).o; }, in.q, dout);
    const auto dk = test::numeric_vjp([&](const auto& x) { return forward({in.q, x, in.v}, p).o; }, in.k, dout);
    const auto dv = test::numeric_vjp([&](const auto& x) { return forward({in.q, in.k, x}, p).o; }, in.v, dout);
    EXPECT_LT(test::max_rel_diff(g.dq, dq), 1e-7) << "dq";
    EXPECT_LT(test::max_rel_diff(g.dk, dk), 1e-7) << "dk";
    EXPECT_LT(test::max_rel_diff(g.dv, dv), 1e-7) << "dv";
    // Guards against a vacuous pass: each gradient has a clearly nonzero entry.
    for (const auto* grad : {&g.dq, &g.dk, &g.dv}) {
      double largest = 0.0;
      for (double x : *grad) largest = std::max(largest, std::abs(x));
      EXPECT_GT(largest, 1e-3);
    }
  }
}

TEST(RefAttention, RejectsBadParams) {
  const Inputs in = random_inputs(shape(1, 3, 2, 2, 2, 2), 13);
  auto p = shape(1, 3, 2, 2, 2, 2);
  EXPECT_ERROR_CONTAINS(ref::attention_forward(in.q, in.k, in.v, p), "ref::attention_forward: heads_q");  // 3 % 2 != 0
  try {
    ref::attention_forward(in.q, in.k, in.v, p);
  } catch (const Error& e) {
    EXPECT_STREQ(e.what(), "ref::attention_forward: heads_q: expected a multiple of heads_kv (2), got 3");
  }
  p = shape(1, 2, 2, 2, 2, 2);
  auto zero = p;
  zero.seqlen_k = 0;
  EXPECT_ERROR_CONTAINS(ref::validate_attention(zero, "test"), "test: seqlen_k");
  zero = p;
  zero.head_dim = 0;
  EXPECT_ERROR_CONTAINS(ref::validate_attention(zero, "test"), "test: head_dim");
  auto bad_window = p;
  bad_window.window_left = -2;
  EXPECT_ERROR_CONTAINS(ref::validate_attention(bad_window, "test"), "test: window_left");
  auto bad_cap = p;
  bad_cap.softcap = -1.0;
  EXPECT_ERROR_CONTAINS(ref::validate_attention(bad_cap, "test"), "test: softcap");
  const std::vector<double> short_q(3, 0.0), kv(16, 0.0);
  EXPECT_ERROR_CONTAINS(ref::attention_forward(short_q, kv, kv, p), "ref::attention_forward: q.size()");
}

}  // namespace
}  // namespace ignis
