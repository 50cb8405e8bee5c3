// The engine's linear layers (f32 and bf16 weights, every kernel path) and its thread pool.
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <mutex>
#include <set>
#include <thread>
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

// q8 as linear.h documents it, written here apart from LinearWeight: each row's blocks of kQ8Block
// columns share scale = max |w| / 127, and each weight is w / scale rounded to nearest (ties to even).
double q8_rounded(const std::vector<float>& w, std::int64_t cols, std::int64_t r, std::int64_t c) {
  const std::int64_t first = c / kQ8Block * kQ8Block, end = std::min(cols, first + kQ8Block);
  float amax = 0.0f;
  for (std::int64_t k = first; k < end; ++k) amax = std::max(amax, std::abs(w[static_cast<std::size_t>(r * cols + k)]));
  const float scale = amax / 127.0f;
  if (scale == 0.0f) return 0.0;
  return static_cast<double>(std::nearbyint(w[static_cast<std::size_t>(r * cols + c)] / scale)) * scale;
}

// The weight the engine should store for (r, c), computed without its code.
double stored(const LinearWeight& lw, const std::vector<float>& w, std::int64_t r, std::int64_t c) {
  const float v = w[static_cast<std::size_t>(r * lw.cols() + c)];
  switch (lw.format()) {
    case WeightFormat::f32: return v;
    case WeightFormat::bf16: return bf16_bits_to_float(float_to_bf16_bits(v));
    case WeightFormat::q8: return q8_rounded(w, lw.cols(), r, c);
  }
  return 0.0;
}

// y = x @ w^T in fp64 over the weights as stored.
std::vector<double> reference(const LinearWeight& lw, const std::vector<float>& w, const std::vector<float>& x,
                              std::int64_t m) {
  const std::int64_t rows = lw.rows(), cols = lw.cols();
  std::vector<double> y(static_cast<std::size_t>(m * rows), 0.0);
  for (std::int64_t i = 0; i < m; ++i)
    for (std::int64_t r = 0; r < rows; ++r) {
      double sum = 0.0;
      for (std::int64_t c = 0; c < cols; ++c) sum += stored(lw, w, r, c) * x[static_cast<std::size_t>(i * cols + c)];
      y[static_cast<std::size_t>(i * rows + r)] = sum;
    }
  return y;
}

TEST(Linear, MatchesFp64ForEveryPath) {
  ThreadPool pool(2);
  std::uint64_t salt = 1;
  // m <= 4: matvec kernels; m = 5, 17: widened sgemm (bf16) or sgemm (f32).
  for (const WeightFormat format : {WeightFormat::f32, WeightFormat::bf16, WeightFormat::q8})
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
          const auto want = reference(lw, w, x, m);
          for (std::size_t i = 0; i < y.size(); ++i)
            ASSERT_NEAR(y[i], want[i], 1e-6 * static_cast<double>(cols + 1))
                << weight_format_name(format) << " rows " << rows << " cols " << cols << " m " << m << " at " << i;
        }
}

TEST(Linear, Avx2KernelsWriteOnlyTheirRowRange) {
  if (!cpu_has_avx2_fma()) GTEST_SKIP() << "no AVX2/FMA on this CPU";
  auto rng = test::case_rng(99);
  const std::int64_t rows = 9, cols = 77;
  const auto w = random_floats(static_cast<std::size_t>(rows * cols), rng);
  const auto x = random_floats(static_cast<std::size_t>(3 * cols), rng);
  for (const WeightFormat format : {WeightFormat::bf16, WeightFormat::q8}) {
    const LinearWeight lw(w, rows, cols, format);
    const auto want = reference(lw, w, x, 3);
    // Rows [2, 7) only, into a wider output (ldy 12): the others stay untouched.
    std::vector<float> y(3 * 12, -7.0f);
    if (format == WeightFormat::bf16)
      matvec_bf16_avx2(lw.bf16_data(), cols, 2, 7, x.data(), 3, y.data(), 12);
    else
      matvec_q8_avx2(lw.q8_data(), lw.q8_scales(), cols, 2, 7, x.data(), 3, y.data(), 12);
    for (std::int64_t i = 0; i < 3; ++i)
      for (std::int64_t r = 0; r < 12; ++r) {
        const float got = y[static_cast<std::size_t>(i * 12 + r)];
        if (r >= 2 && r < 7)
          EXPECT_NEAR(got, want[static_cast<std::size_t>(i * rows + r)], 1e-5) << i << " " << r;
        else
          EXPECT_EQ(got, -7.0f) << i << " " << r;
      }
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
  // q8 by hand: one block of 3 with largest magnitude 65504: scale 65504/127, values rounded.
  const LinearWeight q(w, 1, 6, WeightFormat::q8);
  EXPECT_EQ(q.bytes(), 6u + 4u);
  const float scale = 65504.0f / 127.0f;
  EXPECT_EQ(q.q8_scales()[0], scale);
  EXPECT_EQ(q.q8_data()[5], 127);
  EXPECT_EQ(q.q8_data()[4], 0);  // 1e-3 is far below half a step
  EXPECT_EQ(q8_value(q, 0, 5), 127 * scale);
  // Two blocks of 32 and a tail of 3; the second block is all zero (scale 0).
  std::vector<float> wide(67, 0.0f);
  wide[0] = -2.0f;
  wide[1] = 1.5f;
  wide[65] = 0.5f;
  const LinearWeight q2(wide, 1, 67, WeightFormat::q8);
  EXPECT_EQ(q2.q8_data()[0], -127);
  EXPECT_EQ(q2.q8_data()[1], 95);  // 1.5 / (2 / 127) = 95.25
  EXPECT_EQ(q2.q8_scales()[1], 0.0f);
  EXPECT_EQ(q8_value(q2, 0, 65), 0.5f);
  q2.row_to_f32(0, wide.data());
  EXPECT_EQ(wide[1], 95 * (2.0f / 127.0f));
  EXPECT_EQ(parse_weight_format("q8"), WeightFormat::q8);
  EXPECT_ERROR_CONTAINS(parse_weight_format("q4"), "weight format: name: expected f32, bf16 or q8, got q4");
  EXPECT_ERROR_CONTAINS(LinearWeight(w, 4, 3, WeightFormat::f32), "LinearWeight: values.size: expected 12, got 6");
  EXPECT_ERROR_CONTAINS(LinearWeight(w, 0, 3, WeightFormat::f32),
                        "LinearWeight: shape: expected positive rows and cols, got 0 x 3");
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

TEST(ThreadPool, RunsEveryChunkOnceAndRethrows) {
  ThreadPool pool(3);
  for (int round = 0; round < 200; ++round) {
    const std::int64_t n = 1 + round % 13;
    std::vector<std::atomic<int>> hits(static_cast<std::size_t>(n));
    pool.run_chunks(n, [&](std::int64_t c) { hits[static_cast<std::size_t>(c)]++; });
    for (std::int64_t c = 0; c < n; ++c) ASSERT_EQ(hits[static_cast<std::size_t>(c)].load(), 1) << round;
  }
  // Several threads take part when the chunks are long enough to overlap.
  std::mutex m;
  std::set<std::thread::id> ids;
  pool.run_chunks(64, [&](std::int64_t) {
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
    std::lock_guard<std::mutex> lock(m);
    ids.insert(std::this_thread::get_id());
  });
  EXPECT_GE(ids.size(), 2u);
  EXPECT_ERROR_CONTAINS(pool.run_chunks(9, [](std::int64_t c) {
    if (c == 5) throw Error("chunk failed");
  }),
                        "chunk failed");
  std::atomic<int> after{0};
  pool.run_chunks(3, [&](std::int64_t) { after++; });
  EXPECT_EQ(after.load(), 3);
  EXPECT_ERROR_CONTAINS(ThreadPool(0), "ThreadPool: threads: expected >= 1, got 0");
}

}  // namespace
}  // namespace ignis::engine
