// The fused matrix-vector products (CUDA, bf16 and f32 weights) against the fp64 reference:
// odd sizes (the scalar kernel), the SmolLM2 decode shapes (the 16-byte kernel), 1, 2 and 5 rows
// of x (the NR = 1, 2 and 8 kernels) and more rows than one row group, x rows longer than the
// shared tile, more output rows than four-row warps fill resident blocks (the wide path),
// unaligned weights, and bad arguments. The impl's dtype is the weight dtype; activations are f32
// (x of matvec_add and h of the SwiGLU also bf16).
#include <gtest/gtest.h>

#include <cmath>

#if IGNIS_WITH_CUDA
#include <cuda_runtime.h>
#endif

#include "harness/op_harness.h"
#include "ignis/ops.h"
#include "model/error_text.h"
#include "ref/fused_linear.h"

namespace ignis {
namespace {

using test::Impl;

constexpr float kEps = 1e-5f;

class FusedLinearOp : public testing::TestWithParam<Impl> {};

struct Shape3 {
  std::int64_t n, in, out;
};

// Every case: odd sizes in and out, then SmolLM2-135M's decode shapes (qkv, o, gate/up, down)
// and rows of x past one kernel row group (8) and past one shared tile (1408 floats for 8 rows,
// 11264 for one).
std::vector<Shape3> shapes() {
  std::vector<Shape3> s;
  for (std::int64_t n : {1, 2, 5})
    for (std::size_t i = 0; i < test::kOddSizes.size(); ++i)
      s.push_back({n, test::kOddSizes[i], test::kOddSizes[(i + 2) % test::kOddSizes.size()]});
  for (std::int64_t n : {1, 2, 5}) {
    s.push_back({n, 576, 960});
    s.push_back({n, 576, 576});
    s.push_back({n, 1536, 576});
  }
  s.push_back({3, 576, 1536});
  s.push_back({9, 64, 40});
  s.push_back({37, 200, 33});
  s.push_back({6, 4000, 24});
  s.push_back({1, 13000, 9});
  // Four rows a warp (out >= 16 * 8 blocks an SM * 132 SMs), out odd so the last row group is
  // partial inside a warp; in = 1000 takes several load batches a lane, the last one partial.
  s.push_back({1, 64, 20011});
  if (!test::light_run()) {
    s.push_back({2, 1000, 20011});
    s.push_back({1, 576, 49152});  // the LM head
  }
  return s;
}

// The fp32 sums of `in` products carry an error growing like sqrt(in) * eps(f32) relative to
// the largest output; never below the harness default.
double dot_rtol(std::int64_t in) {
  return std::max(2e-6, 4.0 * std::sqrt(static_cast<double>(in)) * std::ldexp(1.0, -24));
}

struct Inputs {
  std::vector<double> x, norm_weight, w, w_up, y;
};

Inputs make_inputs(const Impl& impl, const Shape3& s, DType x_dtype, std::uint64_t salt) {
  auto rng = test::case_rng(salt);
  Inputs in;
  in.x = test::quantize(test::random_normal(rng, s.n * s.in), x_dtype);
  in.norm_weight = test::quantize(test::random_uniform(rng, s.in, 0.5, 1.5), DType::f32);
  in.w = test::quantize(test::random_normal(rng, s.out * s.in), impl.dtype);
  in.w_up = test::quantize(test::random_normal(rng, s.out * s.in), impl.dtype);
  in.y = test::quantize(test::random_normal(rng, s.n * s.out), DType::f32);
  return in;
}

testing::AssertionResult f32_close(const Tensor& got, const std::vector<double>& ref, std::int64_t in) {
  return test::close_to_reference(test::read_tensor(got), ref, DType::f32, {}, dot_rtol(in));
}

TEST_P(FusedLinearOp, RmsnormMatvec) {
  const Impl impl = GetParam();
  IGNIS_SKIP_UNLESS(impl, fused_linear_supported(impl.device, impl.dtype));
  std::uint64_t salt = 9300;
  for (const Shape3& s : shapes()) {
    SCOPED_TRACE(testing::Message() << impl << " n " << s.n << " in " << s.in << " out " << s.out);
    const Inputs in = make_inputs(impl, s, DType::f32, ++salt);
    Tensor x = test::make_tensor(in.x, {s.n, s.in}, DType::f32, impl.device);
    Tensor nw = test::make_tensor(in.norm_weight, {s.in}, DType::f32, impl.device);
    Tensor w = test::make_tensor(in.w, {s.out, s.in}, impl.dtype, impl.device);
    Tensor y = test::make_poisoned({s.n, s.out}, DType::f32, impl.device);
    rmsnorm_matvec(x, nw, w, y, kEps);
    EXPECT_TRUE(f32_close(y, ref::rmsnorm_matvec(in.x, in.norm_weight, in.w, {s.n, s.in, s.out}, kEps), s.in));
  }
}

TEST_P(FusedLinearOp, MatvecAdd) {
  const Impl impl = GetParam();
  IGNIS_SKIP_UNLESS(impl, fused_linear_supported(impl.device, impl.dtype));
  std::uint64_t salt = 9400;
  for (DType x_dtype : {DType::f32, DType::bf16}) {
    for (const Shape3& s : shapes()) {
      SCOPED_TRACE(testing::Message() << impl << " x " << x_dtype << " n " << s.n << " in " << s.in << " out "
                                      << s.out);
      const Inputs in = make_inputs(impl, s, x_dtype, ++salt);
      Tensor x = test::make_tensor(in.x, {s.n, s.in}, x_dtype, impl.device);
      Tensor w = test::make_tensor(in.w, {s.out, s.in}, impl.dtype, impl.device);
      Tensor y = test::make_tensor(in.y, {s.n, s.out}, DType::f32, impl.device);
      matvec_add(x, w, y);
      EXPECT_TRUE(f32_close(y, ref::matvec_add(in.x, in.w, in.y, {s.n, s.in, s.out}), s.in));
    }
  }
}

TEST_P(FusedLinearOp, RmsnormSwigluMatvec) {
  const Impl impl = GetParam();
  IGNIS_SKIP_UNLESS(impl, fused_linear_supported(impl.device, impl.dtype));
  std::uint64_t salt = 9500;
  for (DType h_dtype : {DType::f32, DType::bf16}) {
    for (const Shape3& s : shapes()) {
      if (s.out * s.in > 4'000'000) continue;  // two LM-head-sized matrices add nothing over one
      SCOPED_TRACE(testing::Message() << impl << " h " << h_dtype << " n " << s.n << " in " << s.in << " ffn "
                                      << s.out);
      const Inputs in = make_inputs(impl, s, DType::f32, ++salt);
      Tensor x = test::make_tensor(in.x, {s.n, s.in}, DType::f32, impl.device);
      Tensor nw = test::make_tensor(in.norm_weight, {s.in}, DType::f32, impl.device);
      Tensor wg = test::make_tensor(in.w, {s.out, s.in}, impl.dtype, impl.device);
      Tensor wu = test::make_tensor(in.w_up, {s.out, s.in}, impl.dtype, impl.device);
      Tensor h = test::make_poisoned({s.n, s.out}, h_dtype, impl.device);
      rmsnorm_swiglu_matvec(x, nw, wg, wu, h, kEps);
      const auto ref =
          ref::rmsnorm_swiglu_matvec(in.x, in.norm_weight, in.w, in.w_up, {s.n, s.in, s.out}, kEps);
      // silu(g) * u multiplies the errors of two dot products: each relative to its own size.
      EXPECT_TRUE(test::close_to_reference(test::read_tensor(h), ref, h_dtype, test::quantize(ref, h_dtype),
                                           2 * dot_rtol(s.in)));
    }
  }
}

// With Stream::overlap_previous a kernel starts before the one ahead of it has finished; it must
// still read that kernel's output, not what the buffer held before. A chain of three ops on one
// stream, each reading the previous one's output (poisoned beforehand), equals the same chain
// launched plainly, bit for bit.
TEST_P(FusedLinearOp, OverlappedChainReadsEachOutput) {
  const Impl impl = GetParam();
  IGNIS_SKIP_UNLESS(impl, fused_linear_supported(impl.device, impl.dtype));
#if IGNIS_WITH_CUDA
  cudaStream_t raw = nullptr;
  ASSERT_EQ(cudaStreamCreate(&raw), cudaSuccess);
  const Shape3 s{1, 576, 1536};
  const Inputs in = make_inputs(impl, s, DType::f32, 9700);
  Tensor x = test::make_tensor(in.x, {s.n, s.in}, DType::f32, impl.device);
  Tensor nw = test::make_tensor(in.norm_weight, {s.in}, DType::f32, impl.device);
  Tensor w1 = test::make_tensor(in.w, {s.out, s.in}, impl.dtype, impl.device);
  Tensor w2 = test::make_tensor(in.w_up, {s.in, s.out}, impl.dtype, impl.device);
  std::vector<std::vector<double>> results;
  for (bool overlap : {false, true}) {
    const Stream stream{raw, overlap};
    Tensor hidden = test::make_poisoned({s.n, s.out}, DType::f32, impl.device);
    Tensor y = test::make_tensor(in.x, {s.n, s.in}, DType::f32, impl.device);
    Tensor logits = test::make_poisoned({s.n, s.out}, DType::f32, impl.device);
    synchronize(stream);
    for (int repeat = 0; repeat < 20; ++repeat) {
      rmsnorm_matvec(x, nw, w1, hidden, kEps, stream);  // hidden = W1 rmsnorm(x)
      matvec_add(hidden, w2, y, stream);                // y += W2 hidden
      rmsnorm_matvec(y, nw, w1, logits, kEps, stream);  // logits = W1 rmsnorm(y)
    }
    synchronize(stream);
    results.push_back(test::read_tensor(logits));
    const std::vector<double> y_host = test::read_tensor(y);
    results.back().insert(results.back().end(), y_host.begin(), y_host.end());
  }
  cudaStreamDestroy(raw);
  ASSERT_EQ(results[0].size(), results[1].size());
  for (std::size_t i = 0; i < results[0].size(); ++i) ASSERT_EQ(results[0][i], results[1][i]) << "at " << i;
#endif
}

// Weights one element past a 16-byte boundary take the scalar kernel even when in is a
// multiple of the pack.
TEST_P(FusedLinearOp, UnalignedWeights) {
  const Impl impl = GetParam();
  IGNIS_SKIP_UNLESS(impl, fused_linear_supported(impl.device, impl.dtype));
  const Shape3 s{2, 64, 12};
  const Inputs in = make_inputs(impl, s, DType::f32, 9600);
  std::vector<double> shifted = {0.0};
  shifted.insert(shifted.end(), in.w.begin(), in.w.end());
  Tensor storage = test::make_tensor(shifted, {s.out * s.in + 1}, impl.dtype, impl.device);
  char* base = static_cast<char*>(storage.data()) + dtype_size(impl.dtype);
  Tensor w = Tensor::view(base, impl.dtype, impl.device, {s.out, s.in});
  Tensor x = test::make_tensor(in.x, {s.n, s.in}, DType::f32, impl.device);
  Tensor nw = test::make_tensor(in.norm_weight, {s.in}, DType::f32, impl.device);
  Tensor y = test::make_poisoned({s.n, s.out}, DType::f32, impl.device);
  rmsnorm_matvec(x, nw, w, y, kEps);
  EXPECT_TRUE(f32_close(y, ref::rmsnorm_matvec(in.x, in.norm_weight, in.w, {s.n, s.in, s.out}, kEps), s.in));
  Tensor y2 = test::make_tensor(in.y, {s.n, s.out}, DType::f32, impl.device);
  matvec_add(x, w, y2);
  EXPECT_TRUE(f32_close(y2, ref::matvec_add(in.x, in.w, in.y, {s.n, s.in, s.out}), s.in));
}

TEST_P(FusedLinearOp, RejectsBadArguments) {
  const Impl impl = GetParam();
  IGNIS_SKIP_UNLESS(impl, fused_linear_supported(impl.device, impl.dtype));
  const Device dev = impl.device;
  auto f32 = [&](const Shape& shape) { return test::make_poisoned(shape, DType::f32, dev); };
  auto wt = [&](const Shape& shape) { return test::make_poisoned(shape, impl.dtype, dev); };
  Tensor x = f32({2, 8}), nw = f32({8}), w = wt({4, 8}), y = f32({2, 4});
  EXPECT_NO_THROW(rmsnorm_matvec(x, nw, w, y, kEps));

  // rmsnorm_matvec
  EXPECT_ERROR_CONTAINS(rmsnorm_matvec(x, f32({7}), w, y, kEps), "rmsnorm_matvec: norm_weight.shape");
  EXPECT_ERROR_CONTAINS(rmsnorm_matvec(x, nw, wt({4, 7}), y, kEps), "rmsnorm_matvec: w.shape");
  EXPECT_ERROR_CONTAINS(rmsnorm_matvec(x, nw, w, f32({2, 5}), kEps), "rmsnorm_matvec: y.shape");
  EXPECT_ERROR_CONTAINS(rmsnorm_matvec(x, nw, w, f32({3, 4}), kEps), "rmsnorm_matvec: y.shape");
  EXPECT_ERROR_CONTAINS(rmsnorm_matvec(x, nw, w, y, -1.0f), "rmsnorm_matvec: eps");
  EXPECT_ERROR_CONTAINS(rmsnorm_matvec(test::make_poisoned({2, 8}, DType::bf16, dev), nw, w, y, kEps),
                        "rmsnorm_matvec: x.dtype");
  EXPECT_ERROR_CONTAINS(rmsnorm_matvec(x, nw, test::make_poisoned({4, 8}, DType::f16, dev), y, kEps),
                        "rmsnorm_matvec: w.dtype");
  EXPECT_ERROR_CONTAINS(rmsnorm_matvec(x, nw, w, test::make_poisoned({2, 4}, DType::bf16, dev), kEps),
                        "rmsnorm_matvec: y.dtype");
  EXPECT_ERROR_CONTAINS(rmsnorm_matvec(x, test::make_poisoned({8}, DType::bf16, dev), w, y, kEps),
                        "rmsnorm_matvec: norm_weight.dtype");
  EXPECT_ERROR_CONTAINS(rmsnorm_matvec(x, nw.to(Device::cpu()), w, y, kEps), "rmsnorm_matvec: norm_weight.device");
  EXPECT_ERROR_CONTAINS(rmsnorm_matvec(x, nw, w.to(Device::cpu()), y, kEps), "rmsnorm_matvec: w.device");
  EXPECT_ERROR_CONTAINS(
      rmsnorm_matvec(x.to(Device::cpu()), nw.to(Device::cpu()), w.to(Device::cpu()), y.to(Device::cpu()), kEps),
      "rmsnorm_matvec: x.device");
  EXPECT_ERROR_CONTAINS(rmsnorm_matvec(f32({2, 0}), f32({0}), wt({4, 0}), y, kEps), "rmsnorm_matvec: x.size(1) (in)");
  Tensor strided = Tensor::view(x.data(), DType::f32, dev, {2, 4}, {8, 1});
  EXPECT_ERROR_CONTAINS(rmsnorm_matvec(strided, f32({4}), wt({4, 4}), y, kEps), "rmsnorm_matvec: x.strides");
  Tensor aliased = Tensor::view(x.data(), DType::f32, dev, {2, 4});
  EXPECT_ERROR_CONTAINS(rmsnorm_matvec(x, nw, w, aliased, kEps), "rmsnorm_matvec: y: expected memory disjoint from x");

  // matvec_add
  EXPECT_NO_THROW(matvec_add(x, w, y));
  EXPECT_ERROR_CONTAINS(matvec_add(x, wt({4, 7}), y), "matvec_add: w.shape");
  EXPECT_ERROR_CONTAINS(matvec_add(x, w, f32({2, 3})), "matvec_add: y.shape");
  EXPECT_ERROR_CONTAINS(matvec_add(test::make_poisoned({2, 8}, DType::f16, dev), w, y), "matvec_add: x.dtype");
  EXPECT_ERROR_CONTAINS(matvec_add(x, w, test::make_poisoned({2, 4}, DType::bf16, dev)), "matvec_add: y.dtype");
  EXPECT_ERROR_CONTAINS(matvec_add(x, test::make_poisoned({4, 8}, DType::i32, dev), y), "matvec_add: w.dtype");
  EXPECT_ERROR_CONTAINS(matvec_add(x, w, aliased), "matvec_add: y: expected memory disjoint from x");
  EXPECT_ERROR_CONTAINS(matvec_add(x, w, y.to(Device::cpu())), "matvec_add: y.device");

  // rmsnorm_swiglu_matvec
  Tensor h = f32({2, 4});
  EXPECT_NO_THROW(rmsnorm_swiglu_matvec(x, nw, w, w, h, kEps));
  EXPECT_ERROR_CONTAINS(rmsnorm_swiglu_matvec(x, nw, w, wt({5, 8}), h, kEps), "rmsnorm_swiglu_matvec: w_up.shape");
  const DType other = impl.dtype == DType::bf16 ? DType::f32 : DType::bf16;
  EXPECT_ERROR_CONTAINS(rmsnorm_swiglu_matvec(x, nw, w, test::make_poisoned({4, 8}, other, dev), h, kEps),
                        "rmsnorm_swiglu_matvec: w_up.dtype");
  EXPECT_ERROR_CONTAINS(rmsnorm_swiglu_matvec(x, nw, w, w, f32({2, 5}), kEps), "rmsnorm_swiglu_matvec: h.shape");
  EXPECT_ERROR_CONTAINS(rmsnorm_swiglu_matvec(x, nw, w, w, test::make_poisoned({2, 4}, DType::f16, dev), kEps),
                        "rmsnorm_swiglu_matvec: h.dtype");
  EXPECT_ERROR_CONTAINS(rmsnorm_swiglu_matvec(x, f32({9}), w, w, h, kEps), "rmsnorm_swiglu_matvec: norm_weight.shape");
  EXPECT_ERROR_CONTAINS(rmsnorm_swiglu_matvec(x, nw, w, w, h, -1.0f), "rmsnorm_swiglu_matvec: eps");
  EXPECT_ERROR_CONTAINS(rmsnorm_swiglu_matvec(x, nw, w, w, aliased, kEps),
                        "rmsnorm_swiglu_matvec: h: expected memory disjoint from x");
}

TEST(FusedLinearOp, NotOnTheCpu) {
  EXPECT_FALSE(fused_linear_supported(Device::cpu(), DType::f32));
  EXPECT_FALSE(fused_linear_supported(Device::cuda(), DType::f16));
  Tensor x = test::make_poisoned({1, 4}, DType::f32, Device::cpu());
  Tensor nw = test::make_poisoned({4}, DType::f32, Device::cpu());
  Tensor w = test::make_poisoned({2, 4}, DType::f32, Device::cpu());
  Tensor y = test::make_poisoned({1, 2}, DType::f32, Device::cpu());
  EXPECT_ERROR_CONTAINS(rmsnorm_matvec(x, nw, w, y, kEps), "rmsnorm_matvec: x.device");
  EXPECT_ERROR_CONTAINS(matvec_add(x, w, y), "matvec_add: x.device");
  EXPECT_ERROR_CONTAINS(rmsnorm_swiglu_matvec(x, nw, w, w, y, kEps), "rmsnorm_swiglu_matvec: x.device");
}

INSTANTIATE_TEST_SUITE_P(Impls, FusedLinearOp, testing::ValuesIn(test::all_impls()), test::impl_param_name);

}  // namespace
}  // namespace ignis
