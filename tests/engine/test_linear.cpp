// The engine's linear layers (f32 and bf16 weights, every kernel path) and its thread pool.
#include <gtest/gtest.h>

#include <atomic>
#include <cmath>
#include <random>

#include "engine/linear.h"
#include "engine/matvec_avx2.h"
#include "engine/thread_pool.h"
#include "harness/op_harness.h"
#include "ignis/float16.h"
#include "model/error_text.h"

namespace ignis::engine {
namespace {

std::vector<float> random_floats(std::size_t n, std::mt19937_64& rng) {
  std::uniform_real_distribution<float> d(-1.0f, 1.0f);
  std::vector<float> v(n);
  for (float& x : v) x = d(rng);
  return v;
}

// y = x @ w^T in fp64 over the weights as stored (bf16-rounded for bf16).
std::vector<double> reference(const std::vector<float>& w, const std::vector<float>& x, std::int64_t rows,
                              std::int64_t cols, std::int64_t m, WeightFormat format) {
  std::vector<double> y(static_cast<std::size_t>(m * rows), 0.0);
  for (std::int64_t i = 0; i < m; ++i)
    for (std::int64_t r = 0; r < rows; ++r) {
      double sum = 0.0;
      for (std::int64_t c = 0; c < cols; ++c) {
        float wv = w[static_cast<std::size_t>(r * cols + c)];
        if (format == WeightFormat::bf16) wv = bf16_bits_to_float(float_to_bf16_bits(wv));
        sum += static_cast<double>(wv) * x[static_cast<std::size_t>(i * cols + c)];
      }
      y[static_cast<std::size_t>(i * rows + r)] = sum;
    }
  return y;
}

TEST(Linear, MatchesFp64ForEveryPath) {
  ThreadPool pool(2);
  std::uint64_t salt = 1;
  // m <= 4: matvec kernels; m = 5, 17: widened sgemm (bf16) or sgemm (f32).
  for (const WeightFormat format : {WeightFormat::f32, WeightFormat::bf16})
    for (const std::int64_t cols : test::kOddSizes)
      for (const std::int64_t rows : {1, 17, 113})
        for (const std::int64_t m : {1, 2, 3, 4, 5, 17}) {
          if (cols == 1023 && rows > 17) continue;
          auto rng = test::case_rng(salt++);
          const auto w = random_floats(static_cast<std::size_t>(rows * cols), rng);
          const auto x = random_floats(static_cast<std::size_t>(m * cols), rng);
          const LinearWeight lw(w, rows, cols, format);
          std::vector<float> y(static_cast<std::size_t>(m * rows), std::nanf(""));
          linear_forward(lw, x.data(), y.data(), m, pool);
          const auto want = reference(w, x, rows, cols, m, format);
          for (std::size_t i = 0; i < y.size(); ++i)
            ASSERT_NEAR(y[i], want[i], 1e-6 * static_cast<double>(cols + 1))
                << weight_format_name(format) << " rows " << rows << " cols " << cols << " m " << m << " at " << i;
        }
}

TEST(Linear, Avx2KernelMatchesScalarRowRanges) {
  if (!cpu_has_avx2_fma()) GTEST_SKIP() << "no AVX2/FMA on this CPU";
  auto rng = test::case_rng(99);
  const std::int64_t rows = 9, cols = 77;
  const auto w = random_floats(static_cast<std::size_t>(rows * cols), rng);
  const auto x = random_floats(static_cast<std::size_t>(3 * cols), rng);
  const LinearWeight lw(w, rows, cols, WeightFormat::bf16);
  const auto want = reference(w, x, rows, cols, 3, WeightFormat::bf16);
  // Rows [2, 7) only, into a wider output (ldy 12): the others stay untouched.
  std::vector<float> y(3 * 12, -7.0f);
  matvec_bf16_avx2(lw.bf16_data(), cols, 2, 7, x.data(), 3, y.data(), 12);
  for (std::int64_t i = 0; i < 3; ++i)
    for (std::int64_t r = 0; r < 12; ++r) {
      const float got = y[static_cast<std::size_t>(i * 12 + r)];
      if (r >= 2 && r < 7)
        EXPECT_NEAR(got, want[static_cast<std::size_t>(i * rows + r)], 1e-5) << i << " " << r;
      else
        EXPECT_EQ(got, -7.0f) << i << " " << r;
    }
}

TEST(Linear, WeightStorage) {
  const std::vector<float> w = {1.0f, 1.00390625f, -2.5f, 3.0f, 1e-3f, 65504.0f};
  const LinearWeight f(w, 2, 3, WeightFormat::f32);
  const LinearWeight b(w, 2, 3, WeightFormat::bf16);
  EXPECT_EQ(f.bytes(), 24u);
  EXPECT_EQ(b.bytes(), 12u);
  float row[3];
  f.row_to_f32(1, row);
  EXPECT_EQ(row[2], 65504.0f);
  b.row_to_f32(0, row);
  EXPECT_EQ(row[0], 1.0f);
  EXPECT_EQ(row[1], 1.0f);  // 1 + 2^-8 ties to even in bf16
  EXPECT_EQ(row[2], -2.5f);
  EXPECT_ERROR_CONTAINS(LinearWeight(w, 4, 3, WeightFormat::f32), "LinearWeight: values.size: expected 12, got 6");
  EXPECT_ERROR_CONTAINS(LinearWeight(w, 0, 3, WeightFormat::f32), "LinearWeight: shape: expected positive rows and cols, got 0 x 3");
}

TEST(ThreadPool, ParallelForCoversEveryIndexOnce) {
  for (int threads : {1, 2, 3}) {
    ThreadPool pool(threads);
    EXPECT_EQ(pool.size(), threads);
    for (const std::int64_t n : {0, 1, 5, 16, 17, 1000}) {
      for (const std::int64_t grain : {1, 16}) {
        std::vector<std::atomic<int>> hits(static_cast<std::size_t>(n));
        pool.parallel_for(n, grain, [&](std::int64_t b, std::int64_t e) {
          if (e < n) EXPECT_EQ(e % grain, 0);
          for (std::int64_t i = b; i < e; ++i) hits[static_cast<std::size_t>(i)]++;
        });
        for (std::int64_t i = 0; i < n; ++i) ASSERT_EQ(hits[static_cast<std::size_t>(i)].load(), 1) << n << " " << i;
      }
    }
  }
}

TEST(ThreadPool, RunsEveryThreadAndRethrows) {
  ThreadPool pool(3);
  for (int round = 0; round < 200; ++round) {
    std::atomic<int> mask{0};
    pool.run([&](int t) { mask |= 1 << t; });
    ASSERT_EQ(mask.load(), 7);
  }
  EXPECT_ERROR_CONTAINS(pool.run([](int t) {
    if (t == 2) throw Error("worker failed");
  }),
                        "worker failed");
  EXPECT_ERROR_CONTAINS(pool.run([](int t) {
    if (t == 0) throw Error("caller failed");
  }),
                        "caller failed");
  std::atomic<int> after{0};
  pool.run([&](int) { after++; });
  EXPECT_EQ(after.load(), 3);
  EXPECT_ERROR_CONTAINS(ThreadPool(0), "ThreadPool: threads: expected >= 1, got 0");
}

}  // namespace
}  // namespace ignis::engine
