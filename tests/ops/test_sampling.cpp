// Every sampling implementation (CPU f32; CUDA f32/f16/bf16) against the fp64 reference: masks
// survivor for survivor; ids exactly, except draws the reference marks as within 1e-7 (relative)
// of a cumulative boundary, where the fixed-point rule may legitimately differ; CUDA ids equal
// the CPU path's without exception; draw statistics, poisoned outputs and bad arguments.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <limits>

#include "harness/op_harness.h"
#include "ignis/ops.h"
#include "model/error_text.h"
#include "ref/sampling.h"
#include "ref/softmax.h"

namespace ignis {
namespace {

using test::Impl;

constexpr double kInf = std::numeric_limits<double>::infinity();
// 25 times the fixed-point rule's worst deviation from the reference (4e-9 of the total at vocab 2^18).
constexpr double kAmbiguous = 1e-7;
// Under the sanitizers (light runs) the 262144 vocabulary is dropped; 50257 still takes the
// multi-pass radix path.
std::vector<std::int64_t> vocabs() {
  if (test::light_run()) return {1, 3, 17, 1023, 50257};
  return {1, 3, 17, 1023, 50257, 262144};
}

class SamplingOp : public testing::TestWithParam<Impl> {};

std::vector<std::int64_t> rows_for(std::int64_t vocab) {
  return vocab > 20000 ? std::vector<std::int64_t>{1, 3} : std::vector<std::int64_t>{1, 3, 17};
}

// Normal logits (stddev 2); `ties` rounds them to integers so that many are equal; `mask_every`
// sets every n-th entry to -inf, and all of row 0 when rows > 1.
std::vector<double> make_logits(const Impl& impl, std::int64_t rows, std::int64_t vocab, std::uint64_t salt,
                                bool ties, int mask_every) {
  auto rng = test::case_rng(salt);
  auto x = test::random_normal(rng, rows * vocab, 2.0);
  if (ties)
    for (double& v : x) v = std::round(v);
  if (mask_every > 0) {
    for (std::size_t i = 0; i < x.size(); i += mask_every) x[i] = -kInf;
    if (rows > 1)
      for (std::int64_t c = 0; c < vocab; ++c) x[c] = -kInf;
  }
  return test::quantize(x, impl.dtype);
}

// Entries of row r that differ from the expected mask (-inf compared exactly; NaN is unwritten).
std::int64_t row_mismatches(const std::vector<double>& got, const std::vector<double>& want, std::int64_t r,
                            std::int64_t vocab) {
  std::int64_t bad = 0;
  for (std::int64_t i = r * vocab; i < (r + 1) * vocab; ++i) bad += !(got[i] == want[i]);
  return bad;
}

// Runs a mask op on x into a poisoned output (or in place) and reads the result back.
template <class Op>
std::vector<double> run_mask(const Impl& impl, const std::vector<double>& x, std::int64_t rows, std::int64_t vocab,
                             bool in_place, Op op) {
  Tensor tx = test::make_tensor(x, {rows, vocab}, impl.dtype, impl.device);
  Tensor ty = in_place ? tx : test::make_poisoned({rows, vocab}, impl.dtype, impl.device);
  op(tx, ty);
  return test::read_tensor(ty);
}

void check_top_k(const Impl& impl, std::int64_t rows, std::int64_t vocab, std::int64_t k, bool ties,
                 std::uint64_t salt, bool in_place = false) {
  SCOPED_TRACE(testing::Message() << impl << " rows " << rows << " vocab " << vocab << " k " << k << " ties " << ties
                                  << (in_place ? " in place" : ""));
  const auto x = make_logits(impl, rows, vocab, salt, ties, ties ? 7 : 0);
  const auto got = run_mask(impl, x, rows, vocab, in_place, [k](const Tensor& in, const Tensor& out) {
    top_k_mask(in, k, out);
  });
  const auto want = ref::top_k_mask(x, rows, vocab, k);
  for (std::int64_t r = 0; r < rows; ++r) EXPECT_EQ(row_mismatches(got, want, r, vocab), 0) << "row " << r;
}

// Returns {rows compared, rows set aside as ambiguous}.
std::pair<int, int> check_top_p(const Impl& impl, std::int64_t rows, std::int64_t vocab, double p, bool ties,
                                std::uint64_t salt, bool in_place = false) {
  SCOPED_TRACE(testing::Message() << impl << " rows " << rows << " vocab " << vocab << " p " << p << " ties " << ties
                                  << (in_place ? " in place" : ""));
  const auto x = make_logits(impl, rows, vocab, salt, ties, ties ? 5 : 0);
  const auto got = run_mask(impl, x, rows, vocab, in_place, [p](const Tensor& in, const Tensor& out) {
    top_p_mask(in, p, out);
  });
  const auto want = ref::top_p_mask(x, rows, vocab, p);
  int ambiguous = 0;
  for (std::int64_t r = 0; r < rows; ++r) {
    if (want.margin[r] < kAmbiguous) {
      ++ambiguous;
      continue;
    }
    EXPECT_EQ(row_mismatches(got, want.masked, r, vocab), 0) << "row " << r << " margin " << want.margin[r];
  }
  return {static_cast<int>(rows), ambiguous};
}

TEST_P(SamplingOp, TopKMaskMatchesReference) {
  const Impl impl = GetParam();
  IGNIS_SKIP_UNLESS(impl, sampling_supported(impl.device, impl.dtype));
  std::uint64_t salt = 0;
  for (std::int64_t vocab : vocabs())
    for (std::int64_t rows : rows_for(vocab))
      for (std::int64_t k : {1, 3, 50, 1024})
        for (bool ties : {false, true}) check_top_k(impl, rows, vocab, k, ties, ++salt);
  check_top_k(impl, 3, 5000, 0, false, ++salt);
  check_top_k(impl, 3, 5000, 77, true, ++salt, true);
}

TEST_P(SamplingOp, TopPMaskMatchesReference) {
  const Impl impl = GetParam();
  IGNIS_SKIP_UNLESS(impl, sampling_supported(impl.device, impl.dtype));
  std::uint64_t salt = 1000;
  int compared = 0, ambiguous = 0;
  auto tally = [&](std::pair<int, int> counts) {
    compared += counts.first;
    ambiguous += counts.second;
  };
  for (std::int64_t vocab : vocabs())
    for (std::int64_t rows : rows_for(vocab))
      for (double p : {0.1, 0.5, 0.9, 1.0})
        for (bool ties : {false, true}) tally(check_top_p(impl, rows, vocab, p, ties, ++salt));
  tally(check_top_p(impl, 3, 5000, 0.7, true, ++salt, true));
  EXPECT_LT(ambiguous * 5, compared) << ambiguous << " of " << compared << " rows were too close to call";
}

// CUDA masks 16-bit rows through a histogram of values for up to 256 rows (top_p_narrow.cu) and
// through the multi-pass kernels past that (and in f32); every path must equal the CPU path's
// fixed-point rule exactly, rows too close to call against the fp64 reference included. Row kinds:
// normal logits, integer ties (and -0 beside +0), one value everywhere (the cut falls inside a single
// value), a +inf entry (no finite weights: the row is unchanged), every 5th entry -inf.
TEST_P(SamplingOp, TopPMaskPathsEqualTheCpuRule) {
  const Impl impl = GetParam();
  IGNIS_SKIP_UNLESS(impl, sampling_supported(impl.device, impl.dtype));
  if (!impl.device.is_cuda()) GTEST_SKIP() << "compares the CUDA paths with the CPU path";
  std::uint64_t salt = 3000;
  const std::int64_t shapes[][2] = {{5, 262144}, {6, 4097}, {300, 1023}};
  for (const auto& shape : shapes) {
    const std::int64_t rows = shape[0], vocab = shape[1];
    auto rng = test::case_rng(++salt);
    auto x = test::random_normal(rng, rows * vocab, 2.0);
    for (std::int64_t r = 0; r < rows; ++r) {
      double* row = x.data() + r * vocab;
      for (std::int64_t i = 0; i < vocab; ++i) {
        switch (r % 5) {
          case 1: row[i] = std::round(row[i] * 0.5); break;
          case 2: row[i] = 1.5; break;
          case 3: if (i == vocab / 2) row[i] = kInf; break;
          case 4: if (i % 5 == 0) row[i] = -kInf; break;
          default: break;
        }
      }
    }
    x = test::quantize(x, impl.dtype);
    for (double p : {0.05, 0.5, 0.9, 0.999}) {
      SCOPED_TRACE(testing::Message() << impl << " rows " << rows << " vocab " << vocab << " p " << p);
      const auto got = run_mask(impl, x, rows, vocab, false, [p](const Tensor& in, const Tensor& out) {
        top_p_mask(in, p, out);
      });
      Tensor host_in = test::make_tensor(x, {rows, vocab}, DType::f32, Device::cpu());
      Tensor host_out = test::make_poisoned({rows, vocab}, DType::f32, Device::cpu());
      top_p_mask(host_in, p, host_out);
      const auto want = test::read_tensor(host_out);
      for (std::int64_t r = 0; r < rows; ++r) EXPECT_EQ(row_mismatches(got, want, r, vocab), 0) << "row " << r;
    }
  }
}

// Rows whose top-p cut falls in a bucket of the multi-pass kernels' top digit (sign, exponent, two
// mantissa bits) holding more tokens than their per-row list (16384 at 3 rows, 1M / rows tokens at
// more): values uniform in [4, 5) put the whole row in one such bucket, so the refine pass splits it
// by the next digit (16-bit values: one list per value, 32 values in [4, 5)). Row kinds: uniform
// [4, 5); the same under ten tokens at 9; normal logits (stddev 3), whose bucket fits. 70 rows take
// the multi-pass kernels for 16-bit logits too (top_p_narrow.cu stops at 64). Masks and ids (top-p
// without top-k, where the draw follows the same cut) must equal the CPU path's.
TEST_P(SamplingOp, TopPSplitsBucketsTooBigForTheList) {
  const Impl impl = GetParam();
  IGNIS_SKIP_UNLESS(impl, sampling_supported(impl.device, impl.dtype));
  if (!impl.device.is_cuda()) GTEST_SKIP() << "compares the CUDA paths with the CPU path";
  std::uint64_t salt = 4000;
  const std::int64_t shapes[][2] = {{3, 40000}, {70, 20000}};
  for (const auto& shape : shapes) {
    const std::int64_t rows = shape[0], vocab = shape[1];
    auto rng = test::case_rng(++salt);
    auto x = test::random_uniform(rng, rows * vocab, 4.0, 5.0);
    const auto normal = test::random_normal(rng, rows * vocab, 3.0);
    for (std::int64_t r = 0; r < rows; ++r) {
      double* row = x.data() + r * vocab;
      if (r % 3 == 1)
        for (std::int64_t i = 0; i < 10; ++i) row[i * 7 + 3] = 9.0;
      if (r % 3 == 2) std::copy_n(normal.data() + r * vocab, vocab, row);
    }
    x = test::quantize(x, impl.dtype);
    Tensor host_in = test::make_tensor(x, {rows, vocab}, DType::f32, Device::cpu());
    for (double p : {0.3, 0.9}) {
      SCOPED_TRACE(testing::Message() << impl << " rows " << rows << " vocab " << vocab << " p " << p);
      const auto got = run_mask(impl, x, rows, vocab, false, [p](const Tensor& in, const Tensor& out) {
        top_p_mask(in, p, out);
      });
      Tensor host_out = test::make_poisoned({rows, vocab}, DType::f32, Device::cpu());
      top_p_mask(host_in, p, host_out);
      const auto want = test::read_tensor(host_out);
      for (std::int64_t r = 0; r < rows; ++r) EXPECT_EQ(row_mismatches(got, want, r, vocab), 0) << "row " << r;
      const SamplingParams params{1.0, 0, p, 17, 3};
      Tensor ids = test::make_poisoned({rows}, DType::i32, impl.device);
      sample(test::make_tensor(x, {rows, vocab}, impl.dtype, impl.device), params, ids);
      Tensor host_ids = test::make_poisoned({rows}, DType::i32, Device::cpu());
      sample(host_in, params, host_ids);
      EXPECT_EQ(test::read_tensor(ids), test::read_tensor(host_ids)) << "CUDA and CPU must draw the same ids";
    }
  }
}

// Top-k samples with and without top-p, many rows a call so that many draws are compared: the CUDA
// kernels list every token of the top-k buckets and cut the list (sorted in shared memory up to 1024
// tokens, by radix passes past that); ids must equal the CPU path's. Normal logits, and rows rounded
// to integers (long runs of equal values, ranked by index). Under the sanitizers (light runs) 40 rows
// and three k: racecheck took past 200 s over the full case.
TEST_P(SamplingOp, TopKSamplesEqualTheCpuRule) {
  const Impl impl = GetParam();
  IGNIS_SKIP_UNLESS(impl, sampling_supported(impl.device, impl.dtype));
  if (!impl.device.is_cuda()) GTEST_SKIP() << "compares the CUDA paths with the CPU path";
  std::uint64_t salt = 5000;
  const bool light = test::light_run();
  const std::int64_t shapes[][2] = {{light ? 40 : 300, 4097}, {2, 50257}};
  const std::vector<std::int64_t> ks = light ? std::vector<std::int64_t>{7, 200, 3000}
                                             : std::vector<std::int64_t>{2, 7, 200, 1000, 3000};
  for (const auto& shape : shapes) {
    const std::int64_t rows = shape[0], vocab = shape[1];
    auto rng = test::case_rng(++salt);
    auto x = test::random_normal(rng, rows * vocab, 3.0);
    for (std::int64_t r = 1; r < rows; r += 2)
      for (std::int64_t i = r * vocab; i < (r + 1) * vocab; ++i) x[i] = std::round(x[i]);
    x = test::quantize(x, impl.dtype);
    Tensor device_in = test::make_tensor(x, {rows, vocab}, impl.dtype, impl.device);
    Tensor host_in = test::make_tensor(x, {rows, vocab}, DType::f32, Device::cpu());
    for (std::int64_t k : ks)
      for (double p : {1.0, 0.5}) {
        SCOPED_TRACE(testing::Message() << impl << " rows " << rows << " vocab " << vocab << " k " << k << " p " << p);
        const SamplingParams params{0.8, k, p, 29, static_cast<std::uint64_t>(k)};
        Tensor ids = test::make_poisoned({rows}, DType::i32, impl.device);
        sample(device_in, params, ids);
        Tensor host_ids = test::make_poisoned({rows}, DType::i32, Device::cpu());
        sample(host_in, params, host_ids);
        EXPECT_EQ(test::read_tensor(ids), test::read_tensor(host_ids)) << "CUDA and CPU must draw the same ids";
      }
  }
}

// ids of one (shape, params) case against the reference, and on CUDA against the CPU path.
std::pair<int, int> check_sample(const Impl& impl, std::int64_t rows, std::int64_t vocab, const SamplingParams& params,
                                 bool ties, std::uint64_t salt) {
  SCOPED_TRACE(testing::Message() << impl << " rows " << rows << " vocab " << vocab << " T " << params.temperature
                                  << " k " << params.top_k << " p " << params.top_p << " seed " << params.seed
                                  << " ties " << ties);
  const auto x = make_logits(impl, rows, vocab, salt, ties, ties ? 3 : 0);
  Tensor tx = test::make_tensor(x, {rows, vocab}, impl.dtype, impl.device);
  Tensor ids = test::make_poisoned({rows}, DType::i32, impl.device);
  sample(tx, params, ids);
  const auto got = test::read_tensor(ids);
  const auto want = ref::sample(x, rows, vocab, params);
  int ambiguous = 0;
  for (std::int64_t r = 0; r < rows; ++r) {
    EXPECT_TRUE(got[r] >= 0 && got[r] < vocab) << "row " << r << " id " << got[r];
    if (want.margin[r] < kAmbiguous) {
      ++ambiguous;
      continue;
    }
    EXPECT_EQ(got[r], want.ids[r]) << "row " << r << " margin " << want.margin[r];
  }
  if (impl.device.is_cuda()) {
    Tensor host_ids = test::make_poisoned({rows}, DType::i32, Device::cpu());
    sample(test::make_tensor(x, {rows, vocab}, DType::f32, Device::cpu()), params, host_ids);
    EXPECT_EQ(got, test::read_tensor(host_ids)) << "CUDA and CPU must draw the same ids";
  }
  return {static_cast<int>(rows), ambiguous};
}

TEST_P(SamplingOp, SampleMatchesReference) {
  const Impl impl = GetParam();
  IGNIS_SKIP_UNLESS(impl, sampling_supported(impl.device, impl.dtype));
  struct Combo {
    double temperature;
    std::int64_t top_k;
    double top_p;
  };
  const std::vector<Combo> combos = {{1.0, 0, 1.0},   {1.0, 1, 1.0},    {0.7, 3, 0.9},
                                     {1.0, 50, 1.0},  {1.3, 1024, 0.9}, {1.0, 0, 0.1},
                                     {0.8, 0, 0.9},   {0.0, 0, 1.0},    {1.0, 50, 0.1}};
  std::uint64_t salt = 2000;
  int compared = 0, ambiguous = 0;
  for (std::int64_t vocab : vocabs())
    for (std::int64_t rows : rows_for(vocab))
      for (std::size_t c = 0; c < combos.size(); ++c)
        for (std::uint64_t seed = 1; seed <= (vocab > 20000 ? 1u : 3u); ++seed) {
          const SamplingParams params{combos[c].temperature, combos[c].top_k, combos[c].top_p, seed * 7919,
                                      seed + c};
          const auto counts = check_sample(impl, rows, vocab, params, c % 2 == 1, ++salt);
          compared += counts.first;
          ambiguous += counts.second;
        }
  EXPECT_LT(ambiguous * 5, compared) << ambiguous << " of " << compared << " draws were too close to call";
}

// 20000 rows of one 5-token distribution in one call: chi-square with 4 degrees of freedom at the
// 0.1% level (critical value 18.47), plain, after top-k 3 and after top-p 0.5.
TEST_P(SamplingOp, DrawsFollowTheDistribution) {
  const Impl impl = GetParam();
  IGNIS_SKIP_UNLESS(impl, sampling_supported(impl.device, impl.dtype));
  const std::int64_t rows = 20000, vocab = 5;
  const std::vector<double> probs = {0.1, 0.2, 0.3, 0.15, 0.25};
  std::vector<double> row;
  for (double p : probs) row.push_back(std::log(p));
  row = test::quantize(row, impl.dtype);
  std::vector<double> x;
  for (std::int64_t r = 0; r < rows; ++r) x.insert(x.end(), row.begin(), row.end());
  Tensor tx = test::make_tensor(x, {rows, vocab}, impl.dtype, impl.device);
  for (const SamplingParams& params : {SamplingParams{1.0, 0, 1.0, 42, 0}, SamplingParams{1.0, 3, 1.0, 43, 0},
                                       SamplingParams{1.0, 0, 0.5, 44, 0}}) {
    // The expected distribution: the reference's masks on the quantized row, then softmax.
    auto kept = ref::top_k_mask(row, 1, vocab, params.top_k);
    kept = ref::top_p_mask(kept, 1, vocab, params.top_p).masked;
    const auto expected = ref::softmax_forward(kept, 1, vocab);
    Tensor ids = test::make_poisoned({rows}, DType::i32, impl.device);
    sample(tx, params, ids);
    std::vector<double> counts(vocab);
    for (double id : test::read_tensor(ids)) {
      ASSERT_TRUE(id >= 0 && id < vocab) << id;
      counts[static_cast<std::size_t>(id)] += 1;
    }
    double chi = 0.0;
    for (std::int64_t i = 0; i < vocab; ++i) {
      const double e = expected[i] * rows;
      if (e == 0.0)
        EXPECT_EQ(counts[i], 0.0) << "token " << i << " was masked";
      else
        chi += (counts[i] - e) * (counts[i] - e) / e;
    }
    EXPECT_LT(chi, 18.47) << "top_k " << params.top_k << " top_p " << params.top_p;
  }
}

TEST_P(SamplingOp, SeedsReproduceAndDiffer) {
  const Impl impl = GetParam();
  IGNIS_SKIP_UNLESS(impl, sampling_supported(impl.device, impl.dtype));
  const std::int64_t rows = 64, vocab = 1000;
  const auto x = make_logits(impl, rows, vocab, 3000, false, 0);
  Tensor tx = test::make_tensor(x, {rows, vocab}, impl.dtype, impl.device);
  auto draw = [&](std::uint64_t seed, std::uint64_t step) {
    Tensor ids = test::make_poisoned({rows}, DType::i32, impl.device);
    sample(tx, {1.0, 0, 0.95, seed, step}, ids);
    return test::read_tensor(ids);
  };
  EXPECT_EQ(draw(5, 1), draw(5, 1));
  EXPECT_NE(draw(5, 1), draw(6, 1));
  EXPECT_NE(draw(5, 1), draw(5, 2));
}

TEST_P(SamplingOp, RejectsBadArguments) {
  const Impl impl = GetParam();
  IGNIS_SKIP_UNLESS(impl, sampling_supported(impl.device, impl.dtype));
  const double nan = std::numeric_limits<double>::quiet_NaN();
  Tensor x = test::make_tensor(std::vector<double>(32, 0.5), {4, 8}, impl.dtype, impl.device);
  Tensor out = test::make_poisoned({4, 8}, impl.dtype, impl.device);
  Tensor ids = test::make_poisoned({4}, DType::i32, impl.device);
  const DType other = impl.dtype == DType::f32 ? DType::f16 : DType::f32;
  EXPECT_ERROR_CONTAINS(top_k_mask(x, -1, out), "top_k_mask: k");
  for (double p : {0.0, -0.1, 1.5, nan}) {
    EXPECT_ERROR_CONTAINS(top_p_mask(x, p, out), "top_p_mask: top_p");
    EXPECT_ERROR_CONTAINS(sample(x, {1.0, 0, p, 0, 0}, ids), "sample: top_p");
  }
  for (double t : {-1.0, nan, kInf}) EXPECT_ERROR_CONTAINS(sample(x, {t, 0, 1.0, 0, 0}, ids), "sample: temperature");
  EXPECT_ERROR_CONTAINS(sample(x, {1.0, -1, 1.0, 0, 0}, ids), "sample: top_k");
  EXPECT_ERROR_CONTAINS(top_k_mask(x, 2, test::make_poisoned({4, 9}, impl.dtype, impl.device)),
                        "top_k_mask: out.shape");
  EXPECT_ERROR_CONTAINS(top_k_mask(x, 2, test::make_poisoned({4, 8}, other, impl.device)), "top_k_mask: out.dtype");
  EXPECT_ERROR_CONTAINS(top_p_mask(x, 0.5, test::make_poisoned({32}, impl.dtype, impl.device)), "top_p_mask: out.dim");
  EXPECT_ERROR_CONTAINS(sample(x, {}, test::make_poisoned({4}, DType::i64, impl.device)), "sample: ids.dtype");
  EXPECT_ERROR_CONTAINS(sample(x, {}, test::make_poisoned({5}, DType::i32, impl.device)), "sample: ids.shape");
  EXPECT_ERROR_CONTAINS(sample(x, {}, test::make_poisoned({4, 1}, DType::i32, impl.device)), "sample: ids.dim");
  EXPECT_ERROR_CONTAINS(sample(test::make_poisoned({32}, impl.dtype, impl.device), {}, ids), "sample: logits.dim");
  EXPECT_ERROR_CONTAINS(sample(test::make_poisoned({4, 0}, impl.dtype, impl.device), {}, ids), "sample: vocab");
  Tensor strided = Tensor::view(x.data(), impl.dtype, impl.device, {4, 4}, {8, 2});
  EXPECT_ERROR_CONTAINS(sample(strided, {}, ids), "sample: logits.strides");
  EXPECT_ERROR_CONTAINS(top_k_mask(strided, 1, strided), "top_k_mask: logits.strides");
  if (cuda_available()) {
    const Device elsewhere = impl.device.is_cpu() ? Device::cuda(0) : Device::cpu();
    EXPECT_ERROR_CONTAINS(sample(x, {}, test::make_poisoned({4}, DType::i32, elsewhere)), "sample: ids.device");
    if (sampling_supported(elsewhere, impl.dtype))
      EXPECT_ERROR_CONTAINS(top_k_mask(x, 2, test::make_poisoned({4, 8}, impl.dtype, elsewhere)),
                            "top_k_mask: out.device");
  }
  try {
    sample(x, {1.0, 0, 1.5, 0, 0}, ids);
    ADD_FAILURE() << "top_p 1.5 was accepted";
  } catch (const Error& e) {
    EXPECT_STREQ(e.what(), "sample: top_p: expected a value in (0, 1], got 1.5");
  }
  // Valid calls still work after the rejected ones, and every id is written.
  sample(x, {}, ids);
  for (double id : test::read_tensor(ids)) EXPECT_TRUE(id >= 0 && id < 8) << id;
}

TEST(SamplingOp, RejectsUnsupportedDtype) {
  Tensor x = test::make_poisoned({2, 2}, DType::f64, Device::cpu());
  Tensor ids = test::make_poisoned({2}, DType::i32, Device::cpu());
  EXPECT_FALSE(sampling_supported(Device::cpu(), DType::f64));
  EXPECT_ERROR_CONTAINS(sample(x, {}, ids), "sample: logits.dtype on cpu");
  EXPECT_ERROR_CONTAINS(top_k_mask(x, 1, x), "top_k_mask: logits.dtype on cpu");
  EXPECT_ERROR_CONTAINS(top_p_mask(x, 0.5, x), "top_p_mask: logits.dtype on cpu");
}

INSTANTIATE_TEST_SUITE_P(Impls, SamplingOp, testing::ValuesIn(test::all_impls()), test::impl_param_name);

}  // namespace
}  // namespace ignis
