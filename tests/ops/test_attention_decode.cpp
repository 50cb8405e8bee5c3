// The split-K decode attention kernel (CUDA f32/f16/bf16) against the fp64 reference run on each
// sequence's visible cache rows: odd and per-sequence lengths (0, 1, chunk edges, the capacity,
// out-of-range values clamped), GQA ratios 1-12, head dims 8-256, scale/window/softcap, growing
// device lengths under one launch configuration (a replayed graph), poisoned outputs and cache
// rows past the lengths, and bad arguments.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <vector>

#include "harness/op_harness.h"
#include "model/error_text.h"
#include "ignis/ops.h"
#include "ref/attention.h"

namespace ignis {
namespace {

using test::Impl;

struct Case {
  std::int64_t heads_kv = 1;
  std::int64_t ratio = 1;  // heads_q / heads_kv
  std::int64_t head_dim = 64;
  std::int64_t capacity = 1;           // max_seqlen
  std::vector<std::int32_t> lengths;  // one per sequence, given to the kernel as is
  AttentionParams params;
  std::int64_t batch() const { return static_cast<std::int64_t>(lengths.size()); }
  std::int64_t heads_q() const { return heads_kv * ratio; }
};

std::ostream& operator<<(std::ostream& out, const Case& c) {
  out << "heads " << c.heads_q() << "/" << c.heads_kv << " head_dim " << c.head_dim << " capacity " << c.capacity
      << " lengths";
  for (std::int32_t len : c.lengths) out << " " << len;
  return out << " scale " << c.params.scale << (c.params.causal ? " causal" : "") << " window "
             << c.params.window_left << "," << c.params.window_right << " softcap " << c.params.softcap;
}

// The inputs of a case, rounded to the dtype; cache rows past a sequence's length are NaN so any
// read of them shows in the output.
struct Inputs {
  std::vector<double> q, k, v;
};

Inputs make_inputs(const Case& c, DType dtype, std::uint64_t salt) {
  auto rng = test::case_rng(salt);
  const auto row = static_cast<std::size_t>(c.heads_kv * c.head_dim);
  const auto cache_count = static_cast<std::size_t>(c.batch() * c.capacity) * row;
  Inputs in;
  in.q =
      test::quantize(test::random_normal(rng, static_cast<std::size_t>(c.batch() * c.heads_q() * c.head_dim)), dtype);
  in.k = test::quantize(test::random_normal(rng, cache_count), dtype);
  in.v = test::quantize(test::random_normal(rng, cache_count), dtype);
  const double nan = std::numeric_limits<double>::quiet_NaN();
  for (std::int64_t b = 0; b < c.batch(); ++b) {
    const std::int64_t len = std::clamp<std::int64_t>(c.lengths[static_cast<std::size_t>(b)], 0, c.capacity);
    for (std::int64_t t = len; t < c.capacity; ++t)
      for (std::size_t e = 0; e < row; ++e) {
        in.k[static_cast<std::size_t>(b * c.capacity + t) * row + e] = nan;
        in.v[static_cast<std::size_t>(b * c.capacity + t) * row + e] = nan;
      }
  }
  return in;
}

// The reference output [batch, 1, heads_q, head_dim]: each sequence's query is its last position
// over its first clamp(length) cache rows; no visible key gives zeros.
std::vector<double> reference(const Case& c, const Inputs& in) {
  const auto row = static_cast<std::size_t>(c.heads_kv * c.head_dim);
  const auto q_size = static_cast<std::size_t>(c.heads_q() * c.head_dim);
  std::vector<double> out(static_cast<std::size_t>(c.batch()) * q_size, 0.0);
  for (std::int64_t b = 0; b < c.batch(); ++b) {
    const std::int64_t len = std::clamp<std::int64_t>(c.lengths[static_cast<std::size_t>(b)], 0, c.capacity);
    if (len == 0) continue;
    ref::AttentionParams p;
    p.heads_q = c.heads_q();
    p.heads_kv = c.heads_kv;
    p.seqlen_q = 1;
    p.seqlen_k = len;
    p.head_dim = c.head_dim;
    p.scale = c.params.scale != 0.0 ? c.params.scale : 1.0 / std::sqrt(static_cast<double>(c.head_dim));
    p.causal = c.params.causal;
    p.window_left = c.params.window_left;
    p.window_right = c.params.window_right;
    p.softcap = c.params.softcap;
    const auto q0 = in.q.begin() + static_cast<std::ptrdiff_t>(static_cast<std::size_t>(b) * q_size);
    const auto k0 = in.k.begin() + static_cast<std::ptrdiff_t>(static_cast<std::size_t>(b * c.capacity) * row);
    const auto v0 = in.v.begin() + static_cast<std::ptrdiff_t>(static_cast<std::size_t>(b * c.capacity) * row);
    const auto rows = static_cast<std::ptrdiff_t>(static_cast<std::size_t>(len) * row);
    const std::vector<double> q_b(q0, q0 + static_cast<std::ptrdiff_t>(q_size)), k_b(k0, k0 + rows), v_b(v0, v0 + rows);
    const auto r = ref::attention_forward(q_b, k_b, v_b, p);
    std::copy(r.o.begin(), r.o.end(), out.begin() + static_cast<std::ptrdiff_t>(static_cast<std::size_t>(b) * q_size));
  }
  return out;
}

Tensor lengths_tensor(std::vector<std::int32_t>& host, Device device) {
  return Tensor::view(host.data(), DType::i32, Device::cpu(), {static_cast<std::int64_t>(host.size())}).to(device);
}

void run_case(const Impl& impl, Case c, std::uint64_t salt) {
  SCOPED_TRACE(testing::Message() << impl << " " << c);
  const Inputs in = make_inputs(c, impl.dtype, salt);
  const Shape q_shape{c.batch(), 1, c.heads_q(), c.head_dim};
  const Shape cache_shape{c.batch(), c.capacity, c.heads_kv, c.head_dim};
  Tensor tq = test::make_tensor(in.q, q_shape, impl.dtype, impl.device);
  Tensor tk = test::make_tensor(in.k, cache_shape, impl.dtype, impl.device);
  Tensor tv = test::make_tensor(in.v, cache_shape, impl.dtype, impl.device);
  Tensor tlen = lengths_tensor(c.lengths, impl.device);
  Tensor to = test::make_poisoned(q_shape, impl.dtype, impl.device);
  attention_decode_forward(tq, tk, tv, tlen, to, c.params);
  const auto ref = reference(c, in);
  EXPECT_TRUE(test::close_to_reference(test::read_tensor(to), ref, impl.dtype, test::quantize(ref, impl.dtype)));
}

Case make_case(std::int64_t heads_kv, std::int64_t ratio, std::int64_t head_dim, std::int64_t capacity,
               std::vector<std::int32_t> lengths, AttentionParams params = {}) {
  return {heads_kv, ratio, head_dim, capacity, std::move(lengths), params};
}

class AttentionDecodeOp : public testing::TestWithParam<Impl> {};

TEST_P(AttentionDecodeOp, OddLengthsAndShapes) {
  const Impl impl = GetParam();
  IGNIS_SKIP_UNLESS(impl, attention_decode_supported(impl.device, impl.dtype));
  std::uint64_t salt = 100;
  std::vector<std::int32_t> odd;
  for (std::int64_t n : test::kOddSizes) odd.push_back(static_cast<std::int32_t>(n));
  run_case(impl, make_case(1, 1, 64, 1023, odd), ++salt);
  run_case(impl, make_case(2, 3, 128, 1023, odd), ++salt);
  run_case(impl, make_case(3, 3, 64, 1152, {1024, 1152, 0}), ++salt);  // the engine's decode shape
  run_case(impl, make_case(2, 4, 128, 2048, {2048, 1500}), ++salt);
  run_case(impl, make_case(1, 8, 80, 300, {113, 300, 3}), ++salt);
  run_case(impl, make_case(2, 12, 128, 700, {517}), ++salt);  // two tiles of the group (8 + 4 heads)
  run_case(impl, make_case(1, 16, 64, 200, {199, 1}), ++salt);
  run_case(impl, make_case(1, 5, 96, 90, {90, 45}), ++salt);
  run_case(impl, make_case(1, 2, 256, 600, {599, 17}), ++salt);
  run_case(impl, make_case(1, 1, 256, 40, {40}), ++salt);
  for (std::int64_t head_dim : {8, 16, 24, 40, 136, 248})
    run_case(impl, make_case(2, 1, head_dim, 50, {37, 50}), ++salt);
  // Out-of-range lengths are clamped to [0, capacity].
  run_case(impl, make_case(1, 3, 64, 33, {-5, 40, 33, 0}), ++salt);
}

// Every chunk size is a power of two in [32, 512]: lengths on both sides of each chunk edge, in
// one batch (so the chunk is whatever this batch size makes it) and one sequence at a time.
TEST_P(AttentionDecodeOp, ChunkEdges) {
  const Impl impl = GetParam();
  IGNIS_SKIP_UNLESS(impl, attention_decode_supported(impl.device, impl.dtype));
  std::vector<std::int32_t> edges;
  for (std::int32_t chunk = 32; chunk <= 512; chunk *= 2)
    for (std::int32_t d : {-1, 0, 1}) edges.push_back(chunk + d);
  std::uint64_t salt = 200;
  run_case(impl, make_case(2, 2, 64, 1030, edges), ++salt);
  for (std::int32_t len : {15, 17, 511, 513, 1024, 1025, 4097})
    run_case(impl, make_case(1, 4, 128, 5000, {len}), ++salt);
}

TEST_P(AttentionDecodeOp, LongCache) {
  const Impl impl = GetParam();
  IGNIS_SKIP_UNLESS(impl, attention_decode_supported(impl.device, impl.dtype));
  if (test::light_run()) GTEST_SKIP() << "light run";
  run_case(impl, make_case(1, 1, 128, 20000, {20000}), 300);
  run_case(impl, make_case(2, 4, 64, 16384, {16384, 9999}), 301);
}

TEST_P(AttentionDecodeOp, ScaleWindowAndSoftcap) {
  const Impl impl = GetParam();
  IGNIS_SKIP_UNLESS(impl, attention_decode_supported(impl.device, impl.dtype));
  const AttentionParams options[] = {
      {.scale = 0.3},
      {.scale = 0.0, .causal = true},
      {.causal = true, .window_left = 0},
      {.window_left = 5},
      {.causal = true, .window_left = 100, .window_right = 3},
      {.window_left = 700},
      {.window_right = 0},
      {.scale = 1.0, .softcap = 1.5},
      {.scale = 0.5, .causal = true, .window_left = 40, .softcap = 4.0},
  };
  std::uint64_t salt = 400;
  for (const AttentionParams& params : options)
    run_case(impl, make_case(2, 3, 64, 1100, {1, 17, 113, 1100, 0, 600}, params), ++salt);
}

// A captured decode step replays with the same tensors while the lengths (read on the device)
// grow: the second call sees new rows without any change to the call.
TEST_P(AttentionDecodeOp, GrowingDeviceLengths) {
  const Impl impl = GetParam();
  IGNIS_SKIP_UNLESS(impl, attention_decode_supported(impl.device, impl.dtype));
  Case full = make_case(3, 3, 64, 1152, {1152, 1152});
  const Inputs in = make_inputs(full, impl.dtype, 500);
  const Shape q_shape{2, 1, 9, 64}, cache_shape{2, 1152, 3, 64};
  Tensor tq = test::make_tensor(in.q, q_shape, impl.dtype, impl.device);
  Tensor tk = test::make_tensor(in.k, cache_shape, impl.dtype, impl.device);
  Tensor tv = test::make_tensor(in.v, cache_shape, impl.dtype, impl.device);
  std::vector<std::int32_t> lengths = {0, 1};
  Tensor tlen = lengths_tensor(lengths, impl.device);
  Tensor to = test::make_poisoned(q_shape, impl.dtype, impl.device);
  // Also through one caller-owned workspace reused by every call, as the engine's graph does.
  const std::int64_t bytes = attention_decode_workspace_bytes(2, 1152, 9, 3, 64);
  ASSERT_GT(bytes, 0);
  Tensor workspace = test::make_poisoned({bytes}, DType::u8, impl.device);
  for (bool own_workspace : {false, true}) {
    for (const std::vector<std::int32_t>& step : std::vector<std::vector<std::int32_t>>{
             {0, 1}, {1, 2}, {16, 17}, {1023, 1024}, {1024, 1025}, {1151, 1152}}) {
      Case c = full;
      c.lengths = step;
      SCOPED_TRACE(testing::Message() << impl << " " << c << (own_workspace ? " workspace" : ""));
      lengths = step;
      copy_bytes(tlen.data(), tlen.device(), lengths.data(), Device::cpu(), lengths.size() * sizeof(std::int32_t));
      if (own_workspace)
        attention_decode_forward(tq, tk, tv, tlen, to, {.causal = true}, workspace);
      else
        attention_decode_forward(tq, tk, tv, tlen, to, {.causal = true});
      const auto ref = reference(c, in);
      EXPECT_TRUE(test::close_to_reference(test::read_tensor(to), ref, impl.dtype, test::quantize(ref, impl.dtype)));
    }
  }
}

TEST_P(AttentionDecodeOp, RejectsBadArguments) {
  const Impl impl = GetParam();
  IGNIS_SKIP_UNLESS(impl, attention_decode_supported(impl.device, impl.dtype));
  auto make = [&](const Shape& shape) { return test::make_poisoned(shape, impl.dtype, impl.device); };
  auto make_as = [&](const Shape& shape, DType dtype) { return test::make_poisoned(shape, dtype, impl.device); };
  const DType other = impl.dtype == DType::f32 ? DType::bf16 : DType::f32;
  std::vector<std::int32_t> host_lengths = {3, 5};
  Tensor q = make({2, 1, 4, 16}), k = make({2, 7, 2, 16}), v = make({2, 7, 2, 16}), o = make({2, 1, 4, 16});
  Tensor len = lengths_tensor(host_lengths, impl.device);
  const AttentionParams none;
  EXPECT_NO_THROW(attention_decode_forward(q, k, v, len, o, none));
  const std::int64_t bytes = attention_decode_workspace_bytes(2, 7, 4, 2, 16);
  EXPECT_NO_THROW(attention_decode_forward(q, k, v, len, o, none, make_as({bytes}, DType::u8)));
  EXPECT_ERROR_CONTAINS(attention_decode_forward(q, k, v, len, o, none, make_as({bytes - 1}, DType::u8)),
                        "workspace.numel()");
  EXPECT_ERROR_CONTAINS(attention_decode_forward(q, k, v, len, o, none, make_as({bytes}, DType::i32)),
                        "workspace");

  EXPECT_ERROR_CONTAINS(attention_decode_forward(make({2, 2, 4, 16}), k, v, len, make({2, 2, 4, 16}), none),
                        "attention_decode_forward: q.size(1) (seqlen_q)");
  EXPECT_ERROR_CONTAINS(attention_decode_forward(q, make({1, 7, 2, 16}), v, len, o, none),
                        "attention_decode_forward: k_cache.shape");
  EXPECT_ERROR_CONTAINS(attention_decode_forward(q, k, make({2, 6, 2, 16}), len, o, none),
                        "attention_decode_forward: v_cache.shape");
  EXPECT_ERROR_CONTAINS(attention_decode_forward(q, k, v, len, make({2, 1, 4, 8}), none),
                        "attention_decode_forward: o.shape");
  EXPECT_ERROR_CONTAINS(attention_decode_forward(q, make({2, 7, 3, 16}), make({2, 7, 3, 16}), len, o, none),
                        "attention_decode_forward: q.size(2) (heads_q)");
  EXPECT_ERROR_CONTAINS(attention_decode_forward(make({2, 1, 64}), k, v, len, o, none),
                        "attention_decode_forward: q.dim");
  EXPECT_ERROR_CONTAINS(attention_decode_forward(q, make({2, 0, 2, 16}), make({2, 0, 2, 16}), len, o, none),
                        "attention_decode_forward: k_cache.size(1) (max_seqlen)");
  EXPECT_ERROR_CONTAINS(attention_decode_forward(q, make_as({2, 7, 2, 16}, other), v, len, o, none),
                        "attention_decode_forward: k_cache.dtype");
  EXPECT_ERROR_CONTAINS(attention_decode_forward(q, k, v, len, make_as({2, 1, 4, 16}, other), none),
                        "attention_decode_forward: o.dtype");
  EXPECT_ERROR_CONTAINS(attention_decode_forward(q, k, v, make_as({2}, DType::i64), o, none),
                        "attention_decode_forward: seqlens_k.dtype");
  EXPECT_ERROR_CONTAINS(attention_decode_forward(q, k, v, make_as({3}, DType::i32), o, none),
                        "attention_decode_forward: seqlens_k.shape");
  Tensor host_len = Tensor::view(host_lengths.data(), DType::i32, Device::cpu(), {2});
  EXPECT_ERROR_CONTAINS(attention_decode_forward(q, k, v, host_len, o, none),
                        "attention_decode_forward: seqlens_k.device");
  Tensor host_k = test::make_poisoned({2, 7, 2, 16}, impl.dtype, Device::cpu());
  EXPECT_ERROR_CONTAINS(attention_decode_forward(q, host_k, v, len, o, none),
                        "attention_decode_forward: k_cache.device");

  // Head dims the kernel does not take: not a multiple of 8, or past 256.
  for (std::int64_t head_dim : {12, 264}) {
    Tensor wq = make({2, 1, 4, head_dim}), wk = make({2, 7, 2, head_dim});
    try {
      attention_decode_forward(wq, wk, wk, len, make({2, 1, 4, head_dim}), none);
      ADD_FAILURE() << "head_dim " << head_dim << " was accepted";
    } catch (const Error& e) {
      EXPECT_EQ(std::string(e.what()), "attention_decode_forward: q.size(3) (head_dim): expected a multiple of 8 up "
                                       "to 256, got " + std::to_string(head_dim));
    }
  }

  // Non-contiguous and misaligned views.
  Tensor wide = make({2, 1, 4, 32});
  Tensor strided_q =
      Tensor::view(wide.data(), impl.dtype, impl.device, {2, 1, 4, 16}, contiguous_strides({2, 1, 4, 32}));
  EXPECT_ERROR_CONTAINS(attention_decode_forward(strided_q, k, v, len, o, none), "attention_decode_forward: q.strides");
  Tensor big = make({2 * 7 * 2 * 16 + 8});
  Tensor shifted_k = Tensor::view(static_cast<char*>(big.data()) + dtype_size(impl.dtype), impl.dtype, impl.device,
                                  {2, 7, 2, 16});
  EXPECT_ERROR_CONTAINS(attention_decode_forward(q, shifted_k, v, len, o, none),
                        "attention_decode_forward: k_cache.data()");

  AttentionParams bad = none;
  bad.window_left = -2;
  EXPECT_ERROR_CONTAINS(attention_decode_forward(q, k, v, len, o, bad), "attention_decode_forward: params.window_left");
  bad = none;
  bad.softcap = -1.0;
  EXPECT_ERROR_CONTAINS(attention_decode_forward(q, k, v, len, o, bad), "attention_decode_forward: params.softcap");
  bad = none;
  bad.scale = std::numeric_limits<double>::infinity();
  EXPECT_ERROR_CONTAINS(attention_decode_forward(q, k, v, len, o, bad), "attention_decode_forward: params.scale");
}

TEST(AttentionDecodeOp, RejectsTheCpuAndF64) {
  EXPECT_FALSE(attention_decode_supported(Device::cpu(), DType::f32));
  EXPECT_FALSE(attention_decode_supported(Device::cuda(0), DType::f64));
  std::vector<std::int32_t> host_lengths = {3};
  const Device cpu = Device::cpu();
  Tensor q = test::make_poisoned({1, 1, 2, 16}, DType::f32, cpu),
         k = test::make_poisoned({1, 4, 2, 16}, DType::f32, cpu);
  Tensor len = Tensor::view(host_lengths.data(), DType::i32, cpu, {1});
  try {
    attention_decode_forward(q, k, k, len, q, {});
    ADD_FAILURE() << "a CPU call was accepted";
  } catch (const Error& e) {
    EXPECT_STREQ(e.what(),
                 "attention_decode_forward: q.device: expected cuda (there is no CPU implementation), got cpu");
  }
}

INSTANTIATE_TEST_SUITE_P(Impls, AttentionDecodeOp, testing::ValuesIn(test::all_impls()), test::impl_param_name);

}  // namespace
}  // namespace ignis
