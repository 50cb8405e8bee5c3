// Every RoPE implementation (CPU f32; CUDA f32/f16/bf16) against the fp64 reference, computed
// with the same fp32 inv_freq values: odd seqlen/heads, partial and odd rotary dims, positions
// up to ~1e6, both pair conventions, forward and backward, per-sequence offsets, in place,
// poisoned outputs and bad arguments.
#include <gtest/gtest.h>

#include "harness/op_harness.h"
#include "ignis/ops.h"
#include "model/error_text.h"
#include "ref/rope.h"

namespace ignis {
namespace {

using test::Impl;

class RopeOp : public testing::TestWithParam<Impl> {};

struct RopeCase {
  std::int64_t batch, seqlen, heads, head_dim, rotary_dim;
  RopeStyle style;
  std::int64_t offset;
  std::vector<std::int32_t> batch_offsets;  // empty: none
  RopeScaling scaling;
  bool backward = false;
  bool in_place = false;
};

std::ostream& operator<<(std::ostream& out, const RopeCase& c) {
  return out << "[" << c.batch << ", " << c.seqlen << ", " << c.heads << ", " << c.head_dim << "] rotary "
             << c.rotary_dim << (c.style == RopeStyle::interleaved ? " interleaved" : " rotate_half") << " offset "
             << c.offset << " batch_offsets " << c.batch_offsets.size() << " scaling "
             << static_cast<int>(c.scaling.kind) << (c.backward ? " backward" : " forward")
             << (c.in_place ? " in place" : "");
}

void check_case(const Impl& impl, const RopeCase& c, std::uint64_t salt) {
  SCOPED_TRACE(testing::Message() << impl << " " << c);
  auto rng = test::case_rng(salt);
  const Shape shape = {c.batch, c.seqlen, c.heads, c.head_dim};
  const auto x = test::quantize(test::random_normal(rng, c.batch * c.seqlen * c.heads * c.head_dim), impl.dtype);
  const std::vector<float> freq_f32 = rope_inv_freq(c.rotary_dim, 10000.0, c.scaling);
  const std::vector<double> inv_freq(freq_f32.begin(), freq_f32.end());
  const float factor = rope_attention_factor(c.scaling);

  RopeArgs args;
  args.rotary_dim = c.rotary_dim;
  args.style = c.style;
  args.position_offset = c.offset;
  args.attention_factor = factor;
  std::vector<std::int64_t> start(c.batch, c.offset);
  if (!c.batch_offsets.empty()) {
    args.batch_offsets = test::make_tensor(std::vector<double>(c.batch_offsets.begin(), c.batch_offsets.end()),
                                           {c.batch}, DType::i32, impl.device);
    for (std::int64_t b = 0; b < c.batch; ++b) start[b] += c.batch_offsets[b];
  }

  Tensor tx = test::make_tensor(x, shape, impl.dtype, impl.device);
  Tensor ty = c.in_place ? tx : test::make_poisoned(shape, impl.dtype, impl.device);
  Tensor tf = test::make_tensor(inv_freq, {c.rotary_dim / 2}, DType::f32, impl.device);
  if (c.backward)
    rope_backward(tx, tf, ty, args);
  else
    rope_forward(tx, tf, ty, args);

  const ref::RopeDims dims{c.batch, c.seqlen, c.heads, c.head_dim, c.rotary_dim, c.style == RopeStyle::interleaved};
  const auto ref = ref::rope_apply(x, inv_freq, dims, start, factor, c.backward ? -1 : 1);
  EXPECT_TRUE(test::close_to_reference(test::read_tensor(ty), ref, impl.dtype, test::quantize(ref, impl.dtype)));
}

constexpr std::int64_t kFarPosition = 1'000'000;

TEST_P(RopeOp, ForwardOddShapes) {
  const Impl impl = GetParam();
  IGNIS_SKIP_UNLESS(impl, rope_supported(impl.device, impl.dtype));
  std::uint64_t salt = 0;
  struct Dims {
    std::int64_t head_dim, rotary_dim;
  };
  for (Dims d : {Dims{64, 64}, Dims{128, 128}, Dims{80, 32}, Dims{81, 80}, Dims{6, 2}})
    for (RopeStyle style : {RopeStyle::rotate_half, RopeStyle::interleaved})
      for (std::int64_t offset : {std::int64_t{0}, kFarPosition}) {
        check_case(impl, {2, 3, 17, d.head_dim, d.rotary_dim, style, offset, {}, {}}, ++salt);
        check_case(impl, {1, 17, 3, d.head_dim, d.rotary_dim, style, offset, {}, {}}, ++salt);
      }
  for (std::int64_t seqlen : {1, 113})
    for (std::int64_t heads : {1, 3})
      check_case(impl, {1, seqlen, heads, 128, 128, RopeStyle::rotate_half, 5, {}, {}}, ++salt);
  check_case(impl, {1, 113, 17, 64, 64, RopeStyle::interleaved, kFarPosition, {}, {}}, ++salt);
}

// The CUDA kernel gives a thread a group of heads (all loaded before the cos/sin math) while the
// grid stays at >= 2^18 threads: at [1, 2731, 47, 128] every dtype and style gets groups of 4 heads
// (16-bit rotate_half, the fewest threads a head, just: 2731 x 8 x 12 groups = 262176), and 47 heads
// leave a partial last group of 3. Too small a shape never leaves groups of 1.
TEST_P(RopeOp, HeadGroupsOnLargeShapes) {
  const Impl impl = GetParam();
  IGNIS_SKIP_UNLESS(impl, rope_supported(impl.device, impl.dtype));
  std::uint64_t salt = 500;
  for (RopeStyle style : {RopeStyle::rotate_half, RopeStyle::interleaved})
    check_case(impl, {1, 2731, 47, 128, 128, style, 3, {}, {}}, ++salt);
  RopeCase c{1, 2731, 47, 128, 128, RopeStyle::rotate_half, 3, {}, {}};
  c.in_place = true;
  check_case(impl, c, ++salt);
}

TEST_P(RopeOp, BackwardOddShapes) {
  const Impl impl = GetParam();
  IGNIS_SKIP_UNLESS(impl, rope_supported(impl.device, impl.dtype));
  std::uint64_t salt = 1000;
  for (RopeStyle style : {RopeStyle::rotate_half, RopeStyle::interleaved})
    for (std::int64_t offset : {std::int64_t{0}, kFarPosition}) {
      RopeCase c{2, 17, 3, 80, 32, style, offset, {}, {}};
      c.backward = true;
      check_case(impl, c, ++salt);
      c = {1, 3, 17, 128, 128, style, offset, {}, {}};
      c.backward = true;
      check_case(impl, c, ++salt);
    }
}

TEST_P(RopeOp, PerSequenceOffsets) {
  const Impl impl = GetParam();
  IGNIS_SKIP_UNLESS(impl, rope_supported(impl.device, impl.dtype));
  std::uint64_t salt = 2000;
  for (RopeStyle style : {RopeStyle::rotate_half, RopeStyle::interleaved}) {
    // Decode: one token per sequence, each at its own length.
    check_case(impl, {3, 1, 17, 128, 128, style, 0, {0, 41, 999'999}, {}}, ++salt);
    // Both offsets add: position_offset + batch_offsets[b] + s.
    check_case(impl, {3, 17, 3, 80, 32, style, 7, {5, 0, 100'000}, {}}, ++salt);
  }
}

TEST_P(RopeOp, ScaledFrequenciesAndAttentionFactor) {
  const Impl impl = GetParam();
  IGNIS_SKIP_UNLESS(impl, rope_supported(impl.device, impl.dtype));
  std::uint64_t salt = 3000;
  RopeScaling yarn;
  yarn.kind = RopeScalingKind::yarn;
  yarn.factor = 4.0;
  yarn.original_max_position_embeddings = 4096;
  RopeScaling llama3;
  llama3.kind = RopeScalingKind::llama3;
  llama3.factor = 8.0;
  for (const RopeScaling& s : {yarn, llama3})
    for (bool backward : {false, true}) {
      RopeCase c{2, 17, 3, 128, 128, RopeStyle::rotate_half, 70'000, {}, s};
      c.backward = backward;
      check_case(impl, c, ++salt);
    }
}

TEST_P(RopeOp, InPlace) {
  const Impl impl = GetParam();
  IGNIS_SKIP_UNLESS(impl, rope_supported(impl.device, impl.dtype));
  std::uint64_t salt = 4000;
  for (RopeStyle style : {RopeStyle::rotate_half, RopeStyle::interleaved}) {
    RopeCase c{1, 17, 3, 80, 32, style, 12, {}, {}};
    c.in_place = true;
    check_case(impl, c, ++salt);
    c = {1, 3, 3, 81, 80, style, 12, {}, {}};
    c.in_place = true;
    check_case(impl, c, ++salt);
  }
}

TEST_P(RopeOp, RejectsBadArguments) {
  const Impl impl = GetParam();
  IGNIS_SKIP_UNLESS(impl, rope_supported(impl.device, impl.dtype));
  const Device dev = impl.device;
  Tensor x = test::make_poisoned({2, 3, 4, 8}, impl.dtype, dev);
  Tensor y = test::make_poisoned({2, 3, 4, 8}, impl.dtype, dev);
  Tensor freq = test::make_tensor({1.0, 0.1, 0.01, 0.001}, {4}, DType::f32, dev);
  RopeArgs args;
  args.rotary_dim = 8;
  EXPECT_NO_THROW(rope_forward(x, freq, y, args));

  RopeArgs odd = args;
  odd.rotary_dim = 7;
  EXPECT_ERROR_CONTAINS(rope_forward(x, freq, y, odd), "rope_forward: args.rotary_dim");
  RopeArgs too_wide = args;
  too_wide.rotary_dim = 10;
  EXPECT_ERROR_CONTAINS(rope_forward(x, test::make_poisoned({5}, DType::f32, dev), y, too_wide),
                        "rope_forward: args.rotary_dim");
  RopeArgs negative = args;
  negative.position_offset = -1;
  EXPECT_ERROR_CONTAINS(rope_forward(x, freq, y, negative), "rope_forward: args.position_offset");
  RopeArgs narrower = args;
  narrower.rotary_dim = 4;
  EXPECT_ERROR_CONTAINS(rope_forward(x, freq, y, narrower), "rope_forward: inv_freq.shape");  // [rotary_dim / 2]
  EXPECT_ERROR_CONTAINS(rope_forward(x, test::make_poisoned({4}, DType::f64, dev), y, args),
                        "rope_forward: inv_freq.dtype");
  EXPECT_ERROR_CONTAINS(rope_forward(x, test::make_poisoned({2, 2}, DType::f32, dev), y, args),
                        "rope_forward: inv_freq.shape");

  const DType other = impl.dtype == DType::f32 ? DType::f16 : DType::f32;
  EXPECT_ERROR_CONTAINS(rope_forward(x, freq, test::make_poisoned({2, 3, 4, 8}, other, dev), args),
                        "rope_forward: y.dtype");
  EXPECT_ERROR_CONTAINS(rope_forward(x, freq, test::make_poisoned({2, 3, 4, 9}, impl.dtype, dev), args),
                        "rope_forward: y.shape");
  EXPECT_ERROR_CONTAINS(rope_forward(x.reshape({6, 4, 8}), freq, y.reshape({6, 4, 8}), args), "rope_forward: x.dim");
  Tensor strided = Tensor::view(x.data(), impl.dtype, dev, {2, 3, 2, 8}, {96, 32, 16, 1});
  EXPECT_ERROR_CONTAINS(rope_forward(strided, freq, strided, args), "rope_forward: x.strides");
  EXPECT_ERROR_CONTAINS(rope_backward(x, freq, test::make_poisoned({2, 3, 4, 8}, other, dev), args),
                        "rope_backward: dx.dtype");

  RopeArgs offsets = args;
  offsets.batch_offsets = test::make_poisoned({3}, DType::i32, dev);
  EXPECT_ERROR_CONTAINS(rope_forward(x, freq, y, offsets), "rope_forward: args.batch_offsets.shape");
  offsets.batch_offsets = test::make_poisoned({2}, DType::i64, dev);
  EXPECT_ERROR_CONTAINS(rope_forward(x, freq, y, offsets), "rope_forward: args.batch_offsets.dtype");

  if (dev.is_cuda()) {
    // Every tensor must live on x's device.
    EXPECT_ERROR_CONTAINS(rope_forward(x, test::make_tensor({1, 1, 1, 1}, {4}, DType::f32, Device::cpu()), y, args),
                          "rope_forward: inv_freq.device");
    EXPECT_ERROR_CONTAINS(rope_forward(x, freq, test::make_poisoned({2, 3, 4, 8}, impl.dtype, Device::cpu()), args),
                          "rope_forward: y.device");
    offsets.batch_offsets = test::make_poisoned({2}, DType::i32, Device::cpu());
    EXPECT_ERROR_CONTAINS(rope_forward(x, freq, y, offsets), "rope_forward: args.batch_offsets.device");
  }

  try {
    rope_forward(x, freq, y, narrower);
  } catch (const Error& e) {
    EXPECT_STREQ(e.what(), "rope_forward: inv_freq.shape: expected [2], got [4]");
  }
  try {
    rope_forward(x, freq, y, odd);
  } catch (const Error& e) {
    EXPECT_STREQ(e.what(), "rope_forward: args.rotary_dim: expected even, in (0, head_dim = 8], got 7");
  }
}

TEST(RopeOp, RejectsUnsupportedDtype) {
  Tensor x = test::make_poisoned({1, 1, 1, 4}, DType::f64, Device::cpu());
  Tensor freq = test::make_tensor({1.0, 0.1}, {2}, DType::f32, Device::cpu());
  EXPECT_FALSE(rope_supported(Device::cpu(), DType::f64));
  RopeArgs args;
  args.rotary_dim = 4;
  EXPECT_ERROR_CONTAINS(rope_forward(x, freq, x, args), "rope_forward: x.dtype on cpu");
}

INSTANTIATE_TEST_SUITE_P(Impls, RopeOp, testing::ValuesIn(test::all_impls()), test::impl_param_name);

}  // namespace
}  // namespace ignis
