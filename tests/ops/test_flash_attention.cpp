// The flash attention kernel (CUDA bf16/f16, head_dim 64/128) against the fp64 reference. The
// first tests each pin one assumption of the kernel (fragment layouts, the mask of the diagonal
// tile, skipped tiles, ragged tiles) on shapes of one or two tiles, so that a failure names the
// part to look at; then odd sequence lengths, GQA, masks with unequal lengths, the KV cache
// variant and bad arguments. o is judged against the naive same-precision result (the reference
// with P = exp(s - max) rounded to the dtype before P V, o rounded to the dtype); lse (f32) to
// 1e-5 relative: scores accumulate in fp32 on the tensor cores and exp2 is the approximate MUFU op.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <functional>
#include <limits>

#include "harness/op_harness.h"
#include "ignis/ops.h"
#include "model/error_text.h"
#include "ops/attention_case.h"
#include "ref/attention.h"

namespace ignis {
namespace {

using test::Impl;

constexpr double kLseRtol = 1e-5;
constexpr double kInf = std::numeric_limits<double>::infinity();

using Case = test::AttentionCase;
using test::shaped;
using test::to_ref;

// The naive same-precision o: P = exp(s - row max) rounded to `dtype` before P V, the sum of the
// unrounded P as the denominator (what a kernel accumulating in fp32 does), o rounded to `dtype`.
std::vector<double> naive_output(const std::vector<double>& q, const std::vector<double>& k,
                                 const std::vector<double>& v, const ref::AttentionParams& p, DType dtype) {
  const std::int64_t D = p.head_dim, group = p.heads_q / p.heads_kv;
  std::vector<double> o(q.size(), 0.0);
  std::vector<double> s(static_cast<std::size_t>(p.seqlen_k));
  auto q_at = [&](std::int64_t b, std::int64_t i, std::int64_t h) {
    return ((b * p.seqlen_q + i) * p.heads_q + h) * D;
  };
  auto kv_at = [&](std::int64_t b, std::int64_t j, std::int64_t h) {
    return ((b * p.seqlen_k + j) * p.heads_kv + h) * D;
  };
  for (std::int64_t b = 0; b < p.batch; ++b)
    for (std::int64_t h = 0; h < p.heads_q; ++h)
      for (std::int64_t i = 0; i < p.seqlen_q; ++i) {
        double max = -kInf;
        for (std::int64_t j = 0; j < p.seqlen_k; ++j) {
          double& sj = s[static_cast<std::size_t>(j)];
          sj = -kInf;
          if (!ref::attention_visible(p, i, j)) continue;
          double dot = 0;
          for (std::int64_t d = 0; d < D; ++d)
            dot += q[static_cast<std::size_t>(q_at(b, i, h) + d)] *
                   k[static_cast<std::size_t>(kv_at(b, j, h / group) + d)];
          sj = p.scale * dot;
          if (p.softcap > 0) sj = p.softcap * std::tanh(sj / p.softcap);
          max = std::max(max, sj);
        }
        if (max == -kInf) continue;
        double sum = 0;
        for (double& sj : s) {
          sj = std::exp(sj - max);
          sum += sj;
        }
        const auto rounded = test::quantize(s, dtype);
        for (std::int64_t d = 0; d < D; ++d) {
          double acc = 0;
          for (std::int64_t j = 0; j < p.seqlen_k; ++j)
            acc += rounded[static_cast<std::size_t>(j)] * v[static_cast<std::size_t>(kv_at(b, j, h / group) + d)];
          o[static_cast<std::size_t>(q_at(b, i, h) + d)] = acc / sum;
        }
      }
  return test::quantize(o, dtype);
}

struct Inputs {
  std::vector<double> q, k, v;
};

Inputs random_inputs(const ref::AttentionParams& p, DType dtype, std::uint64_t salt) {
  auto rng = test::case_rng(salt);
  const auto q_count = static_cast<std::size_t>(p.batch * p.seqlen_q * p.heads_q * p.head_dim);
  const auto kv_count = static_cast<std::size_t>(p.batch * p.seqlen_k * p.heads_kv * p.head_dim);
  Inputs in;
  in.q = test::quantize(test::random_normal(rng, q_count), dtype);
  in.k = test::quantize(test::random_normal(rng, kv_count), dtype);
  in.v = test::quantize(test::random_normal(rng, kv_count), dtype);
  return in;
}

struct Outputs {
  std::vector<double> o, lse;
};

// Runs the kernel on `in` (num_splits as flash_attention_forward's) and checks o and lse against the
// reference; returns what it wrote.
Outputs check_inputs(const Impl& impl, const Case& c, const Inputs& in, std::int64_t num_splits = 0) {
  SCOPED_TRACE(testing::Message() << impl << " " << c << " num_splits " << num_splits);
  const auto p = to_ref(c);
  const Shape q_shape{p.batch, p.seqlen_q, p.heads_q, p.head_dim};
  const Shape kv_shape{p.batch, p.seqlen_k, p.heads_kv, p.head_dim};
  Tensor tq = test::make_tensor(in.q, q_shape, impl.dtype, impl.device);
  Tensor tk = test::make_tensor(in.k, kv_shape, impl.dtype, impl.device);
  Tensor tv = test::make_tensor(in.v, kv_shape, impl.dtype, impl.device);
  Tensor to = test::make_poisoned(q_shape, impl.dtype, impl.device);
  Tensor tlse = test::make_poisoned({p.batch, p.heads_q, p.seqlen_q}, DType::f32, impl.device);
  flash_attention_forward(tq, tk, tv, to, tlse, c.params, num_splits);
  const auto ref = ref::attention_forward(in.q, in.k, in.v, p);
  Outputs got{test::read_tensor(to), test::read_tensor(tlse)};
  EXPECT_TRUE(test::close_to_reference(got.o, ref.o, impl.dtype, naive_output(in.q, in.k, in.v, p, impl.dtype)))
      << "o";
  EXPECT_TRUE(test::close_to_reference(got.lse, ref.lse, DType::f32, {}, kLseRtol)) << "lse";
  return got;
}

Outputs run_case(const Impl& impl, const Case& c, std::uint64_t salt, std::int64_t num_splits = 0) {
  return check_inputs(impl, c, random_inputs(to_ref(c), impl.dtype, salt), num_splits);
}

class FlashAttentionOp : public testing::TestWithParam<Impl> {};

#define SKIP_UNLESS_FLASH(impl) IGNIS_SKIP_UNLESS(impl, flash_attention_supported((impl).device, (impl).dtype))

// ---- one assumption each, on one or two tiles -------------------------------------------------

// One m16 fragment of queries against 16 keys: the Q (A) and K (B) ldmatrix layouts, the C layout
// of S, P packed back into A, and the V (transposed B) layout, with no mask and no second tile.
TEST_P(FlashAttentionOp, LayoutOneFragment) {
  const Impl impl = GetParam();
  SKIP_UNLESS_FLASH(impl);
  run_case(impl, shaped(1, 1, 1, 16, 16, 64), 1000);
  run_case(impl, shaped(1, 1, 1, 16, 16, 128), 1001);
}

// All 8 key tiles of S in one 64-key tile: first 64 rows, then all 4 warps of the mma.sync kernel's 128-query
// block with both of their 16-row fragments (on Hopper, both of the wgmma kernel's warpgroups).
TEST_P(FlashAttentionOp, LayoutOneFullTile) {
  const Impl impl = GetParam();
  SKIP_UNLESS_FLASH(impl);
  run_case(impl, shaped(1, 1, 1, 64, 64, 64), 1010);
  run_case(impl, shaped(1, 1, 1, 64, 64, 128), 1011);
  run_case(impl, shaped(1, 1, 1, 128, 64, 64), 1012);
  run_case(impl, shaped(1, 1, 1, 128, 64, 128), 1013);
}

// q = 0 makes every visible score 0, so o is the mean of the visible V rows whatever Q K^T does:
// a failure here (with lse right) is in P V or the V layout; causal makes it a prefix mean.
TEST_P(FlashAttentionOp, LayoutValuesWithUniformScores) {
  const Impl impl = GetParam();
  SKIP_UNLESS_FLASH(impl);
  for (bool causal : {false, true})
    for (std::int64_t D : {64, 128}) {
      const Case c = shaped(1, 1, 1, 64, 64, D, {.causal = causal});
      Inputs in = random_inputs(to_ref(c), impl.dtype, 1020 + static_cast<std::uint64_t>(D) + causal);
      std::fill(in.q.begin(), in.q.end(), 0.0);
      check_inputs(impl, c, in);
    }
}

// v = 0 leaves lse as the only output that depends on the data: a failure here is in Q K^T,
// the scaling or the row max/sum, not in P V.
TEST_P(FlashAttentionOp, LayoutScoresThroughLse) {
  const Impl impl = GetParam();
  SKIP_UNLESS_FLASH(impl);
  for (std::int64_t D : {64, 128}) {
    const Case c = shaped(1, 1, 1, 16, 64, D);
    Inputs in = random_inputs(to_ref(c), impl.dtype, 1030 + static_cast<std::uint64_t>(D));
    std::fill(in.v.begin(), in.v.end(), 0.0);
    check_inputs(impl, c, in);
  }
}

// The causal diagonal inside one tile (per-element mask); then one query block over two key tiles, whose
// first two warps skip key tile 1; then two query blocks x four key tiles: block 0 skips tiles 2 and 3,
// block 1 sees tiles 0 and 1 unmasked and tiles 2 and 3 masked on the diagonal.
TEST_P(FlashAttentionOp, CausalDiagonalAndSkippedTiles) {
  const Impl impl = GetParam();
  SKIP_UNLESS_FLASH(impl);
  run_case(impl, shaped(1, 1, 1, 64, 64, 64, {.causal = true}), 1040);
  run_case(impl, shaped(1, 1, 1, 128, 128, 64, {.causal = true}), 1041);
  run_case(impl, shaped(1, 1, 1, 128, 128, 128, {.causal = true}), 1042);
  run_case(impl, shaped(1, 1, 1, 256, 256, 64, {.causal = true}), 1043);
  run_case(impl, shaped(1, 1, 1, 256, 256, 128, {.causal = true}), 1044);
}

// Ragged tiles: rows past seqlen_q are never written, keys past seqlen_k are masked and their
// zero-filled V rows add nothing; the online softmax rescales over several key tiles.
TEST_P(FlashAttentionOp, RaggedTilesAndSeveralKeyTiles) {
  const Impl impl = GetParam();
  SKIP_UNLESS_FLASH(impl);
  run_case(impl, shaped(1, 1, 1, 17, 17, 64), 1050);
  run_case(impl, shaped(1, 1, 1, 65, 200, 64), 1051);
  run_case(impl, shaped(1, 1, 1, 3, 300, 128), 1052);
  // Large scores make the running max jump between tiles, exercising the rescale.
  run_case(impl, shaped(1, 1, 1, 33, 257, 64, {.scale = 0.5}), 1053);
}

// ---- shapes, heads and masks -------------------------------------------------------------------

TEST_P(FlashAttentionOp, OddSequenceLengths) {
  const Impl impl = GetParam();
  SKIP_UNLESS_FLASH(impl);
  const std::int64_t ratios[] = {1, 3, 4};
  std::uint64_t n = 0;
  for (std::int64_t seqlen_q : test::kOddSizes)
    for (std::int64_t seqlen_k : test::kOddSizes) {
      Case c;
      c.seqlen_q = seqlen_q;
      c.seqlen_k = seqlen_k;
      c.head_dim = n % 2 == 0 ? 64 : 128;
      c.ratio = ratios[n % 3];
      c.heads_kv = 1 + (n / 3) % 2;
      c.batch = 1 + (n / 2) % 2;
      c.params.causal = (n / 4) % 2 == 1;
      if (seqlen_q * seqlen_k > 100000) {  // keep the reference and compute-sanitizer runs short
        if (test::light_run() && seqlen_q * seqlen_k > 500000) continue;
        c.batch = c.heads_kv = 1;
        c.ratio = std::min<std::int64_t>(c.ratio, 3);
      }
      run_case(impl, c, 1100 + ++n);
    }
}

TEST_P(FlashAttentionOp, GroupedQueryHeads) {
  const Impl impl = GetParam();
  SKIP_UNLESS_FLASH(impl);
  std::uint64_t salt = 1200;
  for (std::int64_t ratio : {1, 3, 4})
    for (bool causal : {false, true})
      run_case(impl, shaped(2, 2, ratio, 70, 90, ratio == 4 ? 128 : 64, {.causal = causal}), ++salt);
}

// Enough query tiles that the Hopper kernel runs persistent blocks taking several units each from its counter
// (at least 4 a block on a 132-SM GPU): 40 sequences x 8 query heads x 2 query tiles, GQA, unequal lengths.
TEST_P(FlashAttentionOp, ManyUnitsPerBlock) {
  const Impl impl = GetParam();
  SKIP_UNLESS_FLASH(impl);
  std::uint64_t salt = 1900;
  for (std::int64_t head_dim : {64, 128})
    for (bool causal : {false, true})
      run_case(impl, shaped(40, 4, 2, 200, 260, head_dim, {.causal = causal}), ++salt);
}

TEST_P(FlashAttentionOp, MasksWithUnequalLengths) {
  const Impl impl = GetParam();
  SKIP_UNLESS_FLASH(impl);
  struct Mask {
    std::int64_t seqlen_q, seqlen_k;
    bool causal;
    std::int64_t left, right;
  };
  const Mask masks[] = {
      {17, 300, true, -1, -1},   // short q at the bottom of many keys
      {300, 17, true, -1, -1},   // long q: the first 283 rows see nothing
      {200, 130, true, -1, -1},  // diagonal crossing tile edges at an offset
      {300, 300, false, 5, 0},   {5, 3, false, 0, 0},       {113, 200, false, -1, 2},
      {400, 400, true, 130, -1}, {200, 113, false, 40, 40}, {150, 150, true, 64, -1},
  };
  std::uint64_t salt = 1300;
  for (const Mask& m : masks) {
    const AttentionParams params{.causal = m.causal, .window_left = m.left, .window_right = m.right};
    ++salt;
    run_case(impl, shaped(1, 2, 2, m.seqlen_q, m.seqlen_k, salt % 2 == 0 ? 64 : 128, params), salt);
  }
}

TEST_P(FlashAttentionOp, ScaleAndSoftcap) {
  const Impl impl = GetParam();
  SKIP_UNLESS_FLASH(impl);
  const AttentionParams options[] = {
      {.scale = 0.0},
      {.scale = 0.3},
      {.scale = 0.0, .softcap = 0.5},
      {.scale = 0.3, .causal = true, .softcap = 4.0},
      {.scale = 1.0, .causal = true, .softcap = 4.0},
  };
  std::uint64_t salt = 1400;
  for (const AttentionParams& params : options) {
    ++salt;
    run_case(impl, shaped(2, 1, 3, 33, 150, salt % 2 == 0 ? 64 : 128, params), salt);
  }
}

TEST_P(FlashAttentionOp, FullyMaskedRowsAreZero) {
  const Impl impl = GetParam();
  SKIP_UNLESS_FLASH(impl);
  // 200 queries over 10 keys: rows 0..189 see nothing; block 0 (rows 0..127) has no visible key at all
  // (the early exit), block 1 mixes masked and visible rows.
  const Case c = shaped(2, 2, 1, 200, 10, 64, {.causal = true});
  const Outputs got = run_case(impl, c, 1500);
  const std::int64_t heads = 2, masked_rows = 190, D = 64;
  for (std::int64_t b = 0; b < c.batch; ++b)
    for (std::int64_t h = 0; h < heads; ++h)
      for (std::int64_t i = 0; i < masked_rows; ++i) {
        EXPECT_EQ(got.lse[static_cast<std::size_t>((b * heads + h) * c.seqlen_q + i)], -kInf);
        for (std::int64_t d = 0; d < D; ++d)
          ASSERT_EQ(got.o[static_cast<std::size_t>(((b * c.seqlen_q + i) * heads + h) * D + d)], 0.0);
      }
}

TEST_P(FlashAttentionOp, LongSequences) {
  const Impl impl = GetParam();
  SKIP_UNLESS_FLASH(impl);
  if (test::light_run()) GTEST_SKIP() << "IGNIS_TEST_LIGHT";
  run_case(impl, shaped(1, 1, 2, 2048, 2048, 64, {.causal = true}), 1600);
  run_case(impl, shaped(1, 1, 1, 1000, 3000, 128), 1601);
}

// Keys split over blocks and merged by lse: one split (no merge), a few, more splits than some tiles
// have key tiles (empty chunks), and the most allowed, over causal, full, windowed and fully masked
// rows, GQA and both head dims.
TEST_P(FlashAttentionOp, SplitKeysMatchTheReference) {
  const Impl impl = GetParam();
  SKIP_UNLESS_FLASH(impl);
  std::uint64_t salt = 1650;
  for (std::int64_t splits : {1, 2, 3, 7, 64}) {
    run_case(impl, shaped(1, 1, 2, 300, 300, 64, {.causal = true}), ++salt, splits);
    run_case(impl, shaped(2, 2, 1, 70, 450, 128), ++salt, splits);
    run_case(impl, shaped(1, 1, 3, 200, 130, 64, {.causal = true}), ++salt, splits);  // rows 0-69 see no key
    run_case(impl, shaped(1, 1, 1, 257, 257, 128, {.causal = true, .window_left = 90}), ++salt, splits);
  }
}

// One 1024-query head is 8 blocks, far fewer than any GPU holds, so the automatic choice splits it; both
// that call and an unsplit one (num_splits 1) against the reference.
TEST_P(FlashAttentionOp, AutomaticSplitsOfASmallGrid) {
  const Impl impl = GetParam();
  SKIP_UNLESS_FLASH(impl);
  run_case(impl, shaped(1, 1, 1, 1024, 1024, 64, {.causal = true}), 1660);
  run_case(impl, shaped(1, 1, 1, 1024, 1024, 64, {.causal = true}), 1660, 1);
}

// What 0 would choose, asked for given lengths: one 64-query tile against 4096 keys is split (to the
// automatic cap of 16 on any GPU that holds 15 blocks), the same tile against 512 keys (8 key tiles) is not,
// nor is a grid of 64 tiles x 64 heads.
TEST_P(FlashAttentionOp, AutomaticSplitsFollowTheKeysAskedFor) {
  const Impl impl = GetParam();
  SKIP_UNLESS_FLASH(impl);
  const AttentionParams causal{.causal = true};
  const Tensor one_tile = test::make_poisoned({1, 64, 1, 64}, impl.dtype, impl.device);
  EXPECT_EQ(flash_attention_auto_splits(one_tile, 4096, causal), 16);
  EXPECT_EQ(flash_attention_auto_splits(one_tile, 512, causal), 1);
  const Tensor many_tiles = test::make_poisoned({1, 4096, 64, 64}, impl.dtype, impl.device);
  EXPECT_EQ(flash_attention_auto_splits(many_tiles, 4096, causal), 1);
  EXPECT_ERROR_CONTAINS(flash_attention_auto_splits(one_tile, 0, causal),
                        "flash_attention_forward: seqlen_k: expected 1 to 2^28, got 0");
}

TEST_P(FlashAttentionOp, WithoutLseWritesTheSameOutput) {
  const Impl impl = GetParam();
  SKIP_UNLESS_FLASH(impl);
  const Case c = shaped(1, 2, 2, 100, 100, 64, {.causal = true});
  const auto p = to_ref(c);
  const Inputs in = random_inputs(p, impl.dtype, 1700);
  const Shape q_shape{p.batch, p.seqlen_q, p.heads_q, p.head_dim},
      kv_shape{p.batch, p.seqlen_k, p.heads_kv, p.head_dim};
  Tensor tq = test::make_tensor(in.q, q_shape, impl.dtype, impl.device);
  Tensor tk = test::make_tensor(in.k, kv_shape, impl.dtype, impl.device);
  Tensor tv = test::make_tensor(in.v, kv_shape, impl.dtype, impl.device);
  Tensor with = test::make_poisoned(q_shape, impl.dtype, impl.device);
  Tensor without = test::make_poisoned(q_shape, impl.dtype, impl.device);
  Tensor lse = test::make_poisoned({p.batch, p.heads_q, p.seqlen_q}, DType::f32, impl.device);
  flash_attention_forward(tq, tk, tv, with, lse, c.params);
  flash_attention_forward(tq, tk, tv, without, Tensor(), c.params);
  EXPECT_EQ(test::read_tensor(with), test::read_tensor(without));
}

// ---- the KV cache variant ------------------------------------------------------------------------

// Each sequence against the reference run on its first seqlens_k[b] cache rows: rows past a
// length hold NaN, which would show if they were read, even times a probability of 0. Length 0 gives
// zeros. Unsplit and in 3 splits (a split's last tile then ends inside the cache), and planned for a longest
// length below the real one (the plan is a schedule only).
TEST_P(FlashAttentionOp, KvCacheWithDeviceLengths) {
  const Impl impl = GetParam();
  SKIP_UNLESS_FLASH(impl);
  const std::int64_t batch = 4, heads_kv = 2, ratio = 3, heads_q = heads_kv * ratio, capacity = 200;
  std::uint64_t salt = 1800;
  for (std::int64_t head_dim : {64, 128})
    for (std::int64_t seqlen_q : {1, 5, 70})
    for (auto [num_splits, longest_hint] : {std::pair{0, 0}, std::pair{3, 0}, std::pair{0, 129}}) {
      const std::vector<std::int32_t> lengths = {static_cast<std::int32_t>(std::min<std::int64_t>(seqlen_q + 2, 200)),
                                                 0, 129, 200};
      auto rng = test::case_rng(++salt);
      const Shape q_shape{batch, seqlen_q, heads_q, head_dim}, cache_shape{batch, capacity, heads_kv, head_dim};
      const auto q_count = static_cast<std::size_t>(batch * seqlen_q * heads_q * head_dim);
      const auto q = test::quantize(test::random_normal(rng, q_count), impl.dtype);
      const auto cache_count = static_cast<std::size_t>(batch * capacity * heads_kv * head_dim);
      auto k = test::quantize(test::random_normal(rng, cache_count), impl.dtype);
      auto v = test::quantize(test::random_normal(rng, cache_count), impl.dtype);
      const auto row = static_cast<std::size_t>(heads_kv * head_dim);
      for (std::int64_t b = 0; b < batch; ++b)
        for (std::int64_t t = lengths[static_cast<std::size_t>(b)]; t < capacity; ++t)
          for (std::size_t e = 0; e < row; ++e) {
            k[static_cast<std::size_t>(b * capacity + t) * row + e] = std::nan("");
            v[static_cast<std::size_t>(b * capacity + t) * row + e] = std::nan("");
          }
      Tensor tq = test::make_tensor(q, q_shape, impl.dtype, impl.device);
      Tensor tk = test::make_tensor(k, cache_shape, impl.dtype, impl.device);
      Tensor tv = test::make_tensor(v, cache_shape, impl.dtype, impl.device);
      std::vector<std::int32_t> host_lengths = lengths;
      Tensor tlen = Tensor::view(host_lengths.data(), DType::i32, Device::cpu(), {batch}).to(impl.device);
      Tensor to = test::make_poisoned(q_shape, impl.dtype, impl.device);
      Tensor tlse = test::make_poisoned({batch, heads_q, seqlen_q}, DType::f32, impl.device);
      const AttentionParams params{.causal = true};
      flash_attention_kvcache_forward(tq, tk, tv, tlen, to, tlse, params, num_splits, {}, longest_hint);
      const auto got_o = test::read_tensor(to);
      const auto got_lse = test::read_tensor(tlse);
      const auto q_size = static_cast<std::ptrdiff_t>(seqlen_q * heads_q * head_dim);
      const auto lse_size = static_cast<std::ptrdiff_t>(heads_q * seqlen_q);
      for (std::int64_t b = 0; b < batch; ++b) {
        SCOPED_TRACE(testing::Message() << impl << " head_dim " << head_dim << " seqlen_q " << seqlen_q << " splits "
                                        << num_splits << " planned for " << longest_hint << " sequence " << b);
        const std::int64_t len = lengths[static_cast<std::size_t>(b)];
        const std::vector<double> o_b(got_o.begin() + b * q_size, got_o.begin() + (b + 1) * q_size);
        const std::vector<double> lse_b(got_lse.begin() + b * lse_size, got_lse.begin() + (b + 1) * lse_size);
        if (len == 0) {
          EXPECT_EQ(o_b, std::vector<double>(o_b.size(), 0.0));
          EXPECT_EQ(lse_b, std::vector<double>(lse_b.size(), -kInf));
          continue;
        }
        const auto k0 = k.begin() + b * capacity * static_cast<std::ptrdiff_t>(row);
        const auto v0 = v.begin() + b * capacity * static_cast<std::ptrdiff_t>(row);
        const Inputs in{std::vector<double>(q.begin() + b * q_size, q.begin() + (b + 1) * q_size),
                        std::vector<double>(k0, k0 + len * static_cast<std::ptrdiff_t>(row)),
                        std::vector<double>(v0, v0 + len * static_cast<std::ptrdiff_t>(row))};
        const auto p = to_ref(shaped(1, heads_kv, ratio, seqlen_q, len, head_dim, params));
        const auto ref = ref::attention_forward(in.q, in.k, in.v, p);
        EXPECT_TRUE(test::close_to_reference(o_b, ref.o, impl.dtype, naive_output(in.q, in.k, in.v, p, impl.dtype)))
            << "o";
        EXPECT_TRUE(test::close_to_reference(lse_b, ref.lse, DType::f32, {}, kLseRtol)) << "lse";
      }
    }
}

// ---- arguments ---------------------------------------------------------------------------------

// Tensors of a valid call: q [2, 5, 4, D], k and v [2, 7, 2, D], lse [2, 4, 5] f32.
struct ValidCall {
  Tensor q, k, v, o, lse;
  ValidCall(const Impl& impl, std::int64_t head_dim = 64)
      : q(test::make_poisoned({2, 5, 4, head_dim}, impl.dtype, impl.device)),
        k(test::make_poisoned({2, 7, 2, head_dim}, impl.dtype, impl.device)),
        v(test::make_poisoned({2, 7, 2, head_dim}, impl.dtype, impl.device)),
        o(test::make_poisoned({2, 5, 4, head_dim}, impl.dtype, impl.device)),
        lse(test::make_poisoned({2, 4, 5}, DType::f32, impl.device)) {}
};

void expect_message(const std::function<void()>& call, const char* message) {
  try {
    call();
    ADD_FAILURE() << "accepted; expected: " << message;
  } catch (const Error& e) {
    EXPECT_STREQ(e.what(), message);
  }
}

TEST_P(FlashAttentionOp, RejectsBadArguments) {
  const Impl impl = GetParam();
  SKIP_UNLESS_FLASH(impl);
  ValidCall t(impl);
  const AttentionParams none;
  auto make = [&](const Shape& shape) { return test::make_poisoned(shape, impl.dtype, impl.device); };
  const DType other = impl.dtype == DType::bf16 ? DType::f16 : DType::bf16;
  EXPECT_NO_THROW(flash_attention_forward(t.q, t.k, t.v, t.o, t.lse, none));
  EXPECT_NO_THROW(flash_attention_forward(t.q, t.k, t.v, t.o, Tensor(), none));

  EXPECT_ERROR_CONTAINS(flash_attention_forward(t.q, make({1, 7, 2, 64}), t.v, t.o, t.lse, none),
                        "flash_attention_forward: k.shape");
  EXPECT_ERROR_CONTAINS(flash_attention_forward(t.q, t.k, make({2, 6, 2, 64}), t.o, t.lse, none),
                        "flash_attention_forward: v.shape");
  EXPECT_ERROR_CONTAINS(flash_attention_forward(t.q, t.k, t.v, make({2, 5, 4, 128}), t.lse, none),
                        "flash_attention_forward: o.shape");
  EXPECT_ERROR_CONTAINS(flash_attention_forward(t.q, t.k, t.v, t.o,
                                                test::make_poisoned({2, 5, 4}, DType::f32, impl.device), none),
                        "flash_attention_forward: lse.shape");
  EXPECT_ERROR_CONTAINS(flash_attention_forward(make({2, 5, 256}), t.k, t.v, t.o, t.lse, none),
                        "flash_attention_forward: q.dim");
  expect_message([&] { flash_attention_forward(t.q, make({2, 7, 3, 64}), make({2, 7, 3, 64}), t.o, t.lse, none); },
                 "flash_attention_forward: q.size(2) (heads_q): expected a multiple of heads_kv (3), got 4");

  ValidCall hd80(impl, 80);
  expect_message([&] { flash_attention_forward(hd80.q, hd80.k, hd80.v, hd80.o, hd80.lse, none); },
                 "flash_attention_forward: q.size(3) (head_dim): expected 64 or 128, got 80");
  ValidCall hd256(impl, 256);
  EXPECT_ERROR_CONTAINS(flash_attention_forward(hd256.q, hd256.k, hd256.v, hd256.o, hd256.lse, none),
                        "flash_attention_forward: q.size(3) (head_dim)");

  EXPECT_ERROR_CONTAINS(flash_attention_forward(t.q, test::make_poisoned({2, 7, 2, 64}, other, impl.device), t.v, t.o,
                                                t.lse, none),
                        "flash_attention_forward: k.dtype");
  EXPECT_ERROR_CONTAINS(flash_attention_forward(t.q, t.k, t.v, t.o,
                                                test::make_poisoned({2, 4, 5}, impl.dtype, impl.device), none),
                        "flash_attention_forward: lse.dtype");
  ValidCall f32(Impl{impl.device, DType::f32});
  expect_message([&] { flash_attention_forward(f32.q, f32.k, f32.v, f32.o, f32.lse, none); },
                 "flash_attention_forward: q.dtype: expected bf16 or f16, got f32");

  Tensor host_k = test::make_poisoned({2, 7, 2, 64}, impl.dtype, Device::cpu());
  EXPECT_ERROR_CONTAINS(flash_attention_forward(t.q, host_k, t.v, t.o, t.lse, none),
                        "flash_attention_forward: k.device");

  ValidCall wide(impl, 128);
  const Shape strides = contiguous_strides({2, 5, 4, 128});
  Tensor strided_q = Tensor::view(wide.q.data(), impl.dtype, impl.device, {2, 5, 4, 64}, strides);
  Tensor strided_o = Tensor::view(wide.o.data(), impl.dtype, impl.device, {2, 5, 4, 64}, strides);
  EXPECT_ERROR_CONTAINS(flash_attention_forward(strided_q, t.k, t.v, t.o, t.lse, none),
                        "flash_attention_forward: q.strides");
  EXPECT_ERROR_CONTAINS(flash_attention_forward(t.q, t.k, t.v, strided_o, t.lse, none),
                        "flash_attention_forward: o.strides");

  // Contiguous but not 16-byte aligned: a view starting one element in.
  Tensor shifted_q = Tensor::view(static_cast<char*>(wide.q.data()) + 2, impl.dtype, impl.device, {2, 5, 4, 64});
  expect_message([&] { flash_attention_forward(shifted_q, t.k, t.v, t.o, t.lse, none); },
                 "flash_attention_forward: q.data: expected 16-byte aligned, got 2");

  AttentionParams bad = none;
  bad.window_left = -2;
  EXPECT_ERROR_CONTAINS(flash_attention_forward(t.q, t.k, t.v, t.o, t.lse, bad),
                        "flash_attention_forward: params.window_left");
  bad = none;
  bad.softcap = -1.0;
  EXPECT_ERROR_CONTAINS(flash_attention_forward(t.q, t.k, t.v, t.o, t.lse, bad),
                        "flash_attention_forward: params.softcap");
  bad = none;
  bad.scale = std::numeric_limits<double>::quiet_NaN();
  EXPECT_ERROR_CONTAINS(flash_attention_forward(t.q, t.k, t.v, t.o, t.lse, bad),
                        "flash_attention_forward: params.scale");
  expect_message([&] { flash_attention_forward(t.q, t.k, t.v, t.o, t.lse, none, -1); },
                 "flash_attention_forward: num_splits: expected 0 (automatic) to 64, got -1");
  expect_message([&] { flash_attention_forward(t.q, t.k, t.v, t.o, t.lse, none, 65); },
                 "flash_attention_forward: num_splits: expected 0 (automatic) to 64, got 65");
  EXPECT_NO_THROW(flash_attention_forward(t.q, t.k, t.v, t.o, t.lse, none, 64));

  // The cached entry point's lengths: wrong dtype, shape, device.
  std::vector<std::int32_t> host_lengths = {7, 7};
  Tensor lengths = Tensor::view(host_lengths.data(), DType::i32, Device::cpu(), {2}).to(impl.device);
  EXPECT_NO_THROW(flash_attention_kvcache_forward(t.q, t.k, t.v, lengths, t.o, t.lse, none));
  Tensor f32_lengths = test::make_poisoned({2}, DType::f32, impl.device);
  EXPECT_ERROR_CONTAINS(flash_attention_kvcache_forward(t.q, t.k, t.v, f32_lengths, t.o, t.lse, none),
                        "flash_attention_forward: seqlens_k.dtype");
  EXPECT_ERROR_CONTAINS(flash_attention_kvcache_forward(t.q, t.k, t.v, lengths.reshape({1, 2}), t.o, t.lse, none),
                        "flash_attention_forward: seqlens_k.dim");
  Tensor host_lengths_view = Tensor::view(host_lengths.data(), DType::i32, Device::cpu(), {2});
  EXPECT_ERROR_CONTAINS(flash_attention_kvcache_forward(t.q, t.k, t.v, host_lengths_view, t.o, t.lse, none),
                        "flash_attention_forward: seqlens_k.device");
  EXPECT_ERROR_CONTAINS(flash_attention_kvcache_forward(t.q, t.k, t.v, lengths, t.o, t.lse, none, 0, {}, -1),
                        "flash_attention_forward: longest_seqlen_k: expected 0 to k_cache.size(1) (max_seqlen)");
  EXPECT_ERROR_CONTAINS(
      flash_attention_kvcache_forward(t.q, t.k, t.v, lengths, t.o, t.lse, none, 0, {}, t.k.size(1) + 1),
      "flash_attention_forward: longest_seqlen_k: expected 0 to k_cache.size(1) (max_seqlen)");
  EXPECT_NO_THROW(flash_attention_kvcache_forward(t.q, t.k, t.v, lengths, t.o, t.lse, none, 0, {}, t.k.size(1)));
}

TEST(FlashAttentionOp, RejectsTheCpuAndOtherHeadDims) {
  EXPECT_FALSE(flash_attention_supported(Device::cpu(), DType::bf16));
  EXPECT_FALSE(flash_attention_supported(Device::cuda(0), DType::f32));
  EXPECT_TRUE(flash_attention_head_dim_supported(64));
  EXPECT_TRUE(flash_attention_head_dim_supported(128));
  EXPECT_FALSE(flash_attention_head_dim_supported(96));
  const Impl cpu{Device::cpu(), DType::bf16};
  ValidCall t(cpu);
  expect_message([&] { flash_attention_forward(t.q, t.k, t.v, t.o, t.lse, {}); },
                 "flash_attention_forward: q.device: expected cuda (there is no CPU implementation), got cpu");
  ValidCall hd96(cpu, 96);
  expect_message([&] { flash_attention_forward(hd96.q, hd96.k, hd96.v, hd96.o, hd96.lse, {}); },
                 "flash_attention_forward: q.size(3) (head_dim): expected 64 or 128, got 96");
  expect_message([&] { flash_attention_auto_splits(t.q, 7, {}); },
                 "flash_attention_forward: q.device: expected cuda (there is no CPU implementation), got cpu");
}

INSTANTIATE_TEST_SUITE_P(Impls, FlashAttentionOp, testing::ValuesIn(test::all_impls()), test::impl_param_name);

}  // namespace
}  // namespace ignis
