// Every RMSNorm / LayerNorm implementation (CPU f32; CUDA f32/f16/bf16) against the fp64
// reference: odd and large shapes (warp-per-row, block-per-row and looping kernels), large and
// offset inputs, poisoned outputs (dx, dweight, dbias too), many rows per block for the
// partial sums of dweight/dbias, and bad arguments.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <vector>

#include "harness/op_harness.h"
#include "ignis/ops.h"
#include "model/error_text.h"
#include "ref/norm.h"

namespace ignis {
namespace {

using test::Impl;

constexpr float kEps = 1e-5f;

class NormOp : public testing::TestWithParam<Impl> {};

enum class Norm { rms, layer };

const char* name(Norm n) { return n == Norm::rms ? "rmsnorm" : "layernorm"; }

// RMSNorm and LayerNorm are implemented for the same (device, dtype) pairs.
bool supported(const Impl& impl) {
  return rmsnorm_supported(impl.device, impl.dtype) && layernorm_supported(impl.device, impl.dtype);
}

// Inputs of one case, already quantized to the impl's dtype.
struct Inputs {
  std::vector<double> x, weight, bias, dy;
};

Inputs make_inputs(const Impl& impl, std::int64_t rows, std::int64_t dim, double scale, double offset,
                   std::uint64_t salt) {
  auto rng = test::case_rng(salt);
  Inputs in;
  in.x = test::random_normal(rng, rows * dim, scale);
  for (double& v : in.x) v += offset;
  in.x = test::quantize(in.x, impl.dtype);
  in.weight = test::random_uniform(rng, dim, 0.5, 1.5);
  for (std::size_t i = 0; i < in.weight.size(); i += 5) in.weight[i] = -in.weight[i];
  in.weight = test::quantize(in.weight, impl.dtype);
  in.bias = test::quantize(test::random_normal(rng, dim), impl.dtype);
  in.dy = test::quantize(test::random_normal(rng, rows * dim), impl.dtype);
  return in;
}

// A common offset much larger than the spread costs fp32 digits in any correct computation
// (the mean itself carries an error relative to the offset), so f32 is allowed
// 2e-6 * offset / scale; a one-pass E[x^2] - E[x]^2 variance would be off by far more.
void check_forward(Norm norm, const Impl& impl, std::int64_t rows, std::int64_t dim, double scale, double offset,
                   std::uint64_t salt) {
  SCOPED_TRACE(testing::Message() << name(norm) << " " << impl << " rows " << rows << " dim " << dim << " scale "
                                  << scale << " offset " << offset);
  const Inputs in = make_inputs(impl, rows, dim, scale, offset, salt);
  Tensor x = test::make_tensor(in.x, {rows, dim}, impl.dtype, impl.device);
  Tensor w = test::make_tensor(in.weight, {dim}, impl.dtype, impl.device);
  Tensor y = test::make_poisoned({rows, dim}, impl.dtype, impl.device);
  std::vector<double> ref;
  if (norm == Norm::rms) {
    rmsnorm_forward(x, w, y, kEps);
    ref = ref::rmsnorm_forward(in.x, in.weight, rows, dim, kEps);
  } else {
    Tensor b = test::make_tensor(in.bias, {dim}, impl.dtype, impl.device);
    layernorm_forward(x, w, b, y, kEps);
    ref = ref::layernorm_forward(in.x, in.weight, in.bias, rows, dim, kEps);
  }
  const double f32_rtol = 2e-6 * std::max(1.0, offset / scale);
  EXPECT_TRUE(
      test::close_to_reference(test::read_tensor(y), ref, impl.dtype, test::quantize(ref, impl.dtype), f32_rtol));
}

// dweight and dbias are sums over `rows` products, accumulated in fp32 by every implementation:
// besides the final rounding to the dtype (which the naive rounded reference covers), they
// carry an fp32 accumulation error that grows like sqrt(rows) * eps(f32) * magnitude. That is
// the relative tolerance (f32) and the floor (f16/bf16) for them, never below the defaults.
double sum_tolerance(std::int64_t rows) {
  return std::max(2e-6, 8.0 * std::sqrt(static_cast<double>(rows)) * std::ldexp(1.0, -24));
}

testing::AssertionResult sum_close(const Tensor& got, const std::vector<double>& ref, DType dtype,
                                   std::int64_t rows) {
  const double tol = sum_tolerance(rows);
  return test::close_to_reference(test::read_tensor(got), ref, dtype, test::quantize(ref, dtype), tol,
                                  std::max(1e-5, tol));
}

// dx = rstd * (g - mean(g) - xhat * mean(g * xhat)) with g = dy * weight subtracts projections
// of g that can be as large as g itself, so its rounding error is relative to rstd * |g|, not to
// |dx| (with dim 1 the exact dx is 0 while rstd * |g| is ~300 |g|). The largest such term over
// all rows is the magnitude the error is judged against; f32 is allowed 1e-5 of it.
double dx_magnitude(const Inputs& in, std::int64_t rows, std::int64_t dim, bool centered) {
  double magnitude = 1.0;
  for (std::int64_t r = 0; r < rows; ++r) {
    double mean = 0.0, sq = 0.0, max_g = 0.0;
    for (std::int64_t c = 0; c < dim; ++c) mean += in.x[r * dim + c] / static_cast<double>(dim);
    for (std::int64_t c = 0; c < dim; ++c) {
      const double d = in.x[r * dim + c] - (centered ? mean : 0.0);
      sq += d * d / static_cast<double>(dim);
      max_g = std::max(max_g, std::abs(in.dy[r * dim + c] * in.weight[c]));
    }
    magnitude = std::max(magnitude, max_g / std::sqrt(sq + kEps));
  }
  return magnitude;
}

testing::AssertionResult dx_close(const Tensor& got, const std::vector<double>& ref, DType dtype, double magnitude) {
  return test::close_to_reference(test::read_tensor(got), ref, dtype, test::quantize(ref, dtype), 1e-5, 1e-5,
                                  magnitude);
}

// jump != 0: row r is offset by (r % 3) * jump, so neighbouring rows' means differ by far more
// than their spread (kept small: the fp32 mean's rounding, relative to the offset, costs any
// implementation dweight digits).
void check_backward(Norm norm, const Impl& impl, std::int64_t rows, std::int64_t dim, double scale,
                    std::uint64_t salt, double jump = 0.0) {
  SCOPED_TRACE(testing::Message() << name(norm) << " backward " << impl << " rows " << rows << " dim " << dim
                                  << " scale " << scale << " jump " << jump);
  Inputs in = make_inputs(impl, rows, dim, scale, 0.0, salt);
  if (jump != 0.0) {
    for (std::int64_t r = 0; r < rows; ++r)
      for (std::int64_t c = 0; c < dim; ++c) in.x[r * dim + c] += static_cast<double>(r % 3) * jump;
    in.x = test::quantize(in.x, impl.dtype);
  }
  Tensor x = test::make_tensor(in.x, {rows, dim}, impl.dtype, impl.device);
  Tensor w = test::make_tensor(in.weight, {dim}, impl.dtype, impl.device);
  Tensor dy = test::make_tensor(in.dy, {rows, dim}, impl.dtype, impl.device);
  Tensor dx = test::make_poisoned({rows, dim}, impl.dtype, impl.device);
  Tensor dw = test::make_poisoned({dim}, impl.dtype, impl.device);
  if (norm == Norm::rms) {
    rmsnorm_backward(x, w, dy, dx, dw, kEps);
    const auto ref = ref::rmsnorm_backward(in.x, in.weight, in.dy, rows, dim, kEps);
    EXPECT_TRUE(dx_close(dx, ref.dx, impl.dtype, dx_magnitude(in, rows, dim, false))) << "dx";
    EXPECT_TRUE(sum_close(dw, ref.dweight, impl.dtype, rows)) << "dweight";
  } else {
    Tensor db = test::make_poisoned({dim}, impl.dtype, impl.device);
    layernorm_backward(x, w, dy, dx, dw, db, kEps);
    const auto ref = ref::layernorm_backward(in.x, in.weight, in.dy, rows, dim, kEps);
    EXPECT_TRUE(dx_close(dx, ref.dx, impl.dtype, dx_magnitude(in, rows, dim, true))) << "dx";
    EXPECT_TRUE(sum_close(dw, ref.dweight, impl.dtype, rows)) << "dweight";
    EXPECT_TRUE(sum_close(db, ref.dbias, impl.dtype, rows)) << "dbias";
  }
}

// Row lengths that reach every kernel: odd sizes (scalar looping kernel), packs that fill a
// warp partly or fully, block-per-row lengths with tails, and lengths past the register budget.
const std::vector<std::int64_t> kPackedDims = {8, 64, 1000, 1024, 1032, 4096, 5000, 8192, 16384, 40000};

TEST_P(NormOp, ForwardOddShapes) {
  const Impl impl = GetParam();
  IGNIS_SKIP_UNLESS(impl, supported(impl));
  for (Norm norm : {Norm::rms, Norm::layer}) {
    std::uint64_t salt = norm == Norm::rms ? 0 : 500;
    for (std::int64_t rows : {1, 3, 17, 113})
      for (std::int64_t dim : test::kOddSizes) check_forward(norm, impl, rows, dim, 1.0, 0.0, ++salt);
    for (std::int64_t dim : kPackedDims) check_forward(norm, impl, 3, dim, 1.0, 0.0, ++salt);
  }
}

TEST_P(NormOp, ForwardLargeAndOffsetInputs) {
  const Impl impl = GetParam();
  IGNIS_SKIP_UNLESS(impl, supported(impl));
  std::uint64_t salt = 1000;
  for (Norm norm : {Norm::rms, Norm::layer})
    for (std::int64_t dim : {17, 1024, 4096}) {
      check_forward(norm, impl, 5, dim, 50.0, 0.0, ++salt);
      check_forward(norm, impl, 5, dim, 1.0, 0.0, ++salt);
    }
  // A large common offset: LayerNorm's variance must not cancel (two-pass statistics).
  for (std::int64_t dim : {113, 1024, 8192}) check_forward(Norm::layer, impl, 4, dim, 1.0, 1000.0, ++salt);
}

// LayerNorm rows whose offset and spread change a lot from row to row: row r is offset by
// (r % 5) * 1000 and scaled by 10^-(r % 3). The CUDA forward combines partial statistics (warps'
// and threads' Moments, by Chan's merge) and reuses its reduction buffers from row to row: a
// merge that drops or skews a term, or statistics leaking from one row into another, show here.
// Row lengths reach the looping kernels (1, 17, 1023: scalar; 40000: packed), warp rows (256) and
// block rows (4096, 16384). Each row is judged with the tolerance of its own offset / scale.
TEST_P(NormOp, ForwardRowsOfDifferentScales) {
  const Impl impl = GetParam();
  IGNIS_SKIP_UNLESS(impl, supported(impl));
  std::uint64_t salt = 1100;
  const std::int64_t rows = 15;  // every (r % 5, r % 3) pair once
  const auto offset = [](std::int64_t r) { return static_cast<double>(r % 5) * 1000.0; };
  const auto scale = [](std::int64_t r) { return std::pow(10.0, -static_cast<double>(r % 3)); };
  for (std::int64_t dim : {1, 17, 256, 1023, 4096, 16384, 40000}) {
    SCOPED_TRACE(testing::Message() << "layernorm " << impl << " dim " << dim);
    Inputs in = make_inputs(impl, rows, dim, 1.0, 0.0, ++salt);
    for (std::int64_t r = 0; r < rows; ++r)
      for (std::int64_t c = 0; c < dim; ++c) in.x[r * dim + c] = in.x[r * dim + c] * scale(r) + offset(r);
    in.x = test::quantize(in.x, impl.dtype);
    Tensor x = test::make_tensor(in.x, {rows, dim}, impl.dtype, impl.device);
    Tensor w = test::make_tensor(in.weight, {dim}, impl.dtype, impl.device);
    Tensor b = test::make_tensor(in.bias, {dim}, impl.dtype, impl.device);
    Tensor y = test::make_poisoned({rows, dim}, impl.dtype, impl.device);
    layernorm_forward(x, w, b, y, kEps);
    const std::vector<double> got = test::read_tensor(y);
    const std::vector<double> ref = ref::layernorm_forward(in.x, in.weight, in.bias, rows, dim, kEps);
    for (std::int64_t r = 0; r < rows; ++r) {
      const auto row = [&](const std::vector<double>& v) {
        return std::vector<double>(v.begin() + r * dim, v.begin() + (r + 1) * dim);
      };
      const std::vector<double> ref_row = row(ref);
      EXPECT_TRUE(test::close_to_reference(row(got), ref_row, impl.dtype, test::quantize(ref_row, impl.dtype),
                                           2e-6 * std::max(1.0, offset(r) / scale(r))))
          << "row " << r << " offset " << offset(r) << " scale " << scale(r);
    }
  }
}

TEST_P(NormOp, BackwardOddShapes) {
  const Impl impl = GetParam();
  IGNIS_SKIP_UNLESS(impl, supported(impl));
  for (Norm norm : {Norm::rms, Norm::layer}) {
    std::uint64_t salt = norm == Norm::rms ? 2000 : 2500;
    for (std::int64_t rows : {1, 3, 17, 113})
      for (std::int64_t dim : test::kOddSizes) check_backward(norm, impl, rows, dim, 1.0, ++salt);
    for (std::int64_t dim : kPackedDims) check_backward(norm, impl, 5, dim, 1.0, ++salt);
    check_backward(norm, impl, 7, 4096, 50.0, ++salt);
  }
}

// More rows than resident groups: each warp/block accumulates dweight/dbias over several rows
// and the partial rows of many blocks are summed.
TEST_P(NormOp, BackwardManyRows) {
  const Impl impl = GetParam();
  IGNIS_SKIP_UNLESS(impl, supported(impl));
  std::uint64_t salt = 3000;
  for (Norm norm : {Norm::rms, Norm::layer}) {
    check_backward(norm, impl, 20000, 64, 1.0, ++salt);   // warp per row
    check_backward(norm, impl, 3000, 2048, 1.0, ++salt);  // block per row
    check_backward(norm, impl, 6000, 17, 1.0, ++salt);    // scalar looping kernel
  }
}

// The CUDA backward's paths by row length (src/cuda/ops/norm_backward.cu, plan_staged): one block a row
// with 1, 2 and 4 packs a thread (4096, 8192, 16384; on fast-memory cards such as the H200, 8192 16-bit
// and 4096 f32 columns take 512 threads of 2 packs), clusters of 2 (f32 16384), 4 and 8 blocks
// (65536: 8 for bf16/f16 and f32; 40008: 4 for bf16/f16, 8 for f32, the last block's slice
// shorter), slices whose thread count is not a power of two (12296), and rows past 8 blocks'
// slices (262144: the looping kernel). Several rows a group, so the register sums cover many rows.
TEST_P(NormOp, BackwardRowLengthPaths) {
  const Impl impl = GetParam();
  IGNIS_SKIP_UNLESS(impl, supported(impl));
  std::uint64_t salt = 3500;
  for (Norm norm : {Norm::rms, Norm::layer}) {
    check_backward(norm, impl, 700, 4096, 1.0, ++salt);
    check_backward(norm, impl, 600, 8192, 1.0, ++salt);
    check_backward(norm, impl, 400, 16384, 1.0, ++salt);
    check_backward(norm, impl, 300, 12296, 1.0, ++salt);
    check_backward(norm, impl, 40, 40008, 1.0, ++salt);
    check_backward(norm, impl, 70, 65536, 1.0, ++salt);
    check_backward(norm, impl, 3, 262144, 1.0, ++salt);
  }
}

// The CUDA LayerNorm backward shifts a row's sums by the previous row's mean (one reduction a
// row, or a step of two rows at 4096 and 8192 16-bit columns) and must fall back to two passes where
// rows' means jump.
TEST_P(NormOp, BackwardRowsOfDifferentMeans) {
  const Impl impl = GetParam();
  IGNIS_SKIP_UNLESS(impl, supported(impl));
  std::uint64_t salt = 3600;
  for (std::int64_t dim : {64, 1024, 4096, 8192, 16384})
    check_backward(Norm::layer, impl, 300, dim, 1.0, ++salt, 8.0);
}

// dweight/dbias are sums over row groups fixed by the launch, added in a fixed order: two runs
// give the same bits (dx too).
TEST_P(NormOp, BackwardIsDeterministic) {
  const Impl impl = GetParam();
  IGNIS_SKIP_UNLESS(impl, supported(impl));
  std::uint64_t salt = 3700;
  for (std::int64_t dim : {std::int64_t{17}, std::int64_t{4096}, std::int64_t{16384}}) {
    const std::int64_t rows = 1024;
    const Inputs in = make_inputs(impl, rows, dim, 1.0, 0.0, ++salt);
    Tensor x = test::make_tensor(in.x, {rows, dim}, impl.dtype, impl.device);
    Tensor w = test::make_tensor(in.weight, {dim}, impl.dtype, impl.device);
    Tensor dy = test::make_tensor(in.dy, {rows, dim}, impl.dtype, impl.device);
    std::vector<double> first[4];  // dx, dweight, dbias, RMSNorm dweight
    for (int run = 0; run < 2; ++run) {
      SCOPED_TRACE(testing::Message() << impl << " dim " << dim << " run " << run);
      Tensor dx = test::make_poisoned({rows, dim}, impl.dtype, impl.device);
      Tensor dw = test::make_poisoned({dim}, impl.dtype, impl.device);
      Tensor db = test::make_poisoned({dim}, impl.dtype, impl.device);
      layernorm_backward(x, w, dy, dx, dw, db, kEps);
      const std::vector<double> got[3] = {test::read_tensor(dx), test::read_tensor(dw), test::read_tensor(db)};
      for (int i = 0; i < 3; ++i) {
        if (run == 0) first[i] = got[i];
        else EXPECT_TRUE(first[i] == got[i]) << "output " << i << " differs between runs";
      }
      Tensor dw_rms = test::make_poisoned({dim}, impl.dtype, impl.device);
      rmsnorm_backward(x, w, dy, dx, dw_rms, kEps);
      const std::vector<double> rms = test::read_tensor(dw_rms);
      if (run == 0) first[3] = rms;
      else EXPECT_TRUE(first[3] == rms) << "rms dweight differs between runs";
    }
  }
}

TEST_P(NormOp, BackwardNoRowsGivesZeroSums) {
  const Impl impl = GetParam();
  IGNIS_SKIP_UNLESS(impl, supported(impl));
  Tensor x = test::make_tensor({}, {0, 5}, impl.dtype, impl.device);
  Tensor w = test::make_tensor({1, 2, 3, 4, 5}, {5}, impl.dtype, impl.device);
  Tensor dw = test::make_poisoned({5}, impl.dtype, impl.device);
  Tensor db = test::make_poisoned({5}, impl.dtype, impl.device);
  rmsnorm_backward(x, w, x, x, dw, kEps);
  EXPECT_EQ(test::read_tensor(dw), std::vector<double>(5, 0.0));
  dw = test::make_poisoned({5}, impl.dtype, impl.device);
  layernorm_backward(x, w, x, x, dw, db, kEps);
  EXPECT_EQ(test::read_tensor(dw), std::vector<double>(5, 0.0));
  EXPECT_EQ(test::read_tensor(db), std::vector<double>(5, 0.0));
}

TEST_P(NormOp, RejectsBadArguments) {
  const Impl impl = GetParam();
  IGNIS_SKIP_UNLESS(impl, supported(impl));
  Tensor x = test::make_poisoned({4, 8}, impl.dtype, impl.device);
  Tensor w = test::make_poisoned({8}, impl.dtype, impl.device);
  Tensor y = test::make_poisoned({4, 8}, impl.dtype, impl.device);
  Tensor w_short = test::make_poisoned({7}, impl.dtype, impl.device);
  Tensor w_2d = test::make_poisoned({1, 8}, impl.dtype, impl.device);
  const DType other = impl.dtype == DType::f32 ? DType::f64 : DType::f32;
  Tensor w_dtype = test::make_poisoned({8}, other, impl.device);
  Tensor y_dtype = test::make_poisoned({4, 8}, other, impl.device);
  const Device elsewhere = impl.device.is_cpu() ? Device::cuda(0) : Device::cpu();
  // Never dereferenced: the device check fails first.
  Tensor w_elsewhere = Tensor::view(w.data(), impl.dtype, elsewhere, {8});
  Tensor strided = Tensor::view(x.data(), impl.dtype, impl.device, {4, 4}, {8, 2});
  Tensor w_strided = Tensor::view(x.data(), impl.dtype, impl.device, {8}, {2});
  Tensor x_1d = test::make_poisoned({8}, impl.dtype, impl.device);

  EXPECT_ERROR_CONTAINS(rmsnorm_forward(x, w_short, y, kEps), "rmsnorm_forward: weight.shape");
  EXPECT_ERROR_CONTAINS(rmsnorm_forward(x, w_2d, y, kEps), "rmsnorm_forward: weight.dim");
  EXPECT_ERROR_CONTAINS(rmsnorm_forward(x, w_dtype, y, kEps), "rmsnorm_forward: weight.dtype");
  EXPECT_ERROR_CONTAINS(rmsnorm_forward(x, w, y_dtype, kEps), "rmsnorm_forward: y.dtype");
  EXPECT_ERROR_CONTAINS(rmsnorm_forward(x, w_elsewhere, y, kEps), "rmsnorm_forward: weight.device");
  EXPECT_ERROR_CONTAINS(rmsnorm_forward(strided, w_short, strided, kEps), "rmsnorm_forward: x.strides");
  EXPECT_ERROR_CONTAINS(rmsnorm_forward(x, w_strided, y, kEps), "rmsnorm_forward: weight.strides");
  EXPECT_ERROR_CONTAINS(rmsnorm_forward(x_1d, w, x_1d, kEps), "rmsnorm_forward: x.dim");
  EXPECT_ERROR_CONTAINS(rmsnorm_forward(x, w, y, -1.0f), "rmsnorm_forward: eps");
  EXPECT_ERROR_CONTAINS(rmsnorm_forward(x, w, y, NAN), "rmsnorm_forward: eps");
  EXPECT_ERROR_CONTAINS(layernorm_forward(x, w, w_short, y, kEps), "layernorm_forward: bias.shape");
  EXPECT_ERROR_CONTAINS(layernorm_forward(x, w, w_dtype, y, kEps), "layernorm_forward: bias.dtype");
  EXPECT_ERROR_CONTAINS(layernorm_forward(x, w, w_elsewhere, y, kEps), "layernorm_forward: bias.device");
  EXPECT_ERROR_CONTAINS(rmsnorm_backward(x, w, x, y, w_short, kEps), "rmsnorm_backward: dweight.shape");
  EXPECT_ERROR_CONTAINS(rmsnorm_backward(x, w, y_dtype, y, w, kEps), "rmsnorm_backward: dy.dtype");
  EXPECT_ERROR_CONTAINS(rmsnorm_backward(x, w, strided, y, w, kEps), "rmsnorm_backward: dy.shape");
  EXPECT_ERROR_CONTAINS(layernorm_backward(x, w, x, y, w, w_short, kEps), "layernorm_backward: dbias.shape");
  EXPECT_ERROR_CONTAINS(layernorm_backward(x, w, x, y, w, w_dtype, kEps), "layernorm_backward: dbias.dtype");
  EXPECT_ERROR_CONTAINS(layernorm_backward(x, w, x, y, w_elsewhere, w, kEps), "layernorm_backward: dweight.device");
  EXPECT_ERROR_CONTAINS(layernorm_backward(x, w, x, strided, w, w, kEps), "layernorm_backward: dx.shape");
  try {
    rmsnorm_forward(x, w_short, y, kEps);
    ADD_FAILURE() << "no throw";
  } catch (const Error& e) {
    EXPECT_STREQ(e.what(), "rmsnorm_forward: weight.shape: expected [8], got [7]");
  }
}

TEST(NormOp, RejectsUnsupportedDtype) {
  Tensor x = test::make_poisoned({2, 2}, DType::i32, Device::cpu());
  Tensor w = test::make_poisoned({2}, DType::i32, Device::cpu());
  EXPECT_FALSE(rmsnorm_supported(Device::cpu(), DType::i32));
  EXPECT_FALSE(layernorm_supported(Device::cpu(), DType::f16));
  EXPECT_ERROR_CONTAINS(rmsnorm_forward(x, w, x, kEps), "rmsnorm_forward: x.dtype");
  EXPECT_ERROR_CONTAINS(layernorm_forward(x, w, w, x, kEps), "layernorm_forward: x.dtype");
}

INSTANTIATE_TEST_SUITE_P(Impls, NormOp, testing::ValuesIn(test::all_impls()), test::impl_param_name);

}  // namespace
}  // namespace ignis
