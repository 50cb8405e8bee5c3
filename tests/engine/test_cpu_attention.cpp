// The CPU attention backend against plain fp64 attention: GQA, prefill behind a filled cache,
// decode, long rows crossing key blocks, and argument checks.
#include <gtest/gtest.h>

#include <cmath>
#include <random>

#include "engine/cpu_attention.h"
#include "harness/max_error.h"
#include "model/error_text.h"

namespace ignis::engine {
namespace {

struct Case {
  std::int64_t batch, n_new, heads_q, heads_kv, head_dim, max_seq;
  std::vector<std::int64_t> lengths;
};

std::vector<float> random_floats(std::size_t n, std::mt19937_64& rng, float scale) {
  std::normal_distribution<float> d(0.0f, scale);
  std::vector<float> v(n);
  for (float& x : v) x = d(rng);
  return v;
}

// out[b, i, h, :] of plain causal attention in fp64.
std::vector<double> reference(const Case& c, const std::vector<float>& q, const std::vector<float>& k,
                              const std::vector<float>& v, double scale) {
  std::vector<double> out(q.size(), 0.0);
  const std::int64_t group = c.heads_q / c.heads_kv;
  for (std::int64_t b = 0; b < c.batch; ++b)
    for (std::int64_t i = 0; i < c.n_new; ++i)
      for (std::int64_t h = 0; h < c.heads_q; ++h) {
        const std::int64_t len = c.lengths[static_cast<std::size_t>(b)];
        const std::int64_t visible = len - c.n_new + i + 1;
        const std::int64_t qrow = ((b * c.n_new + i) * c.heads_q + h) * c.head_dim;
        std::vector<double> s(static_cast<std::size_t>(visible));
        double mx = -1e300;
        for (std::int64_t j = 0; j < visible; ++j) {
          const std::int64_t krow = ((b * c.max_seq + j) * c.heads_kv + h / group) * c.head_dim;
          double dot = 0.0;
          for (std::int64_t d = 0; d < c.head_dim; ++d) dot += static_cast<double>(q[qrow + d]) * k[krow + d];
          s[static_cast<std::size_t>(j)] = dot * scale;
          mx = std::max(mx, dot * scale);
        }
        double sum = 0.0;
        for (double& x : s) sum += (x = std::exp(x - mx));
        for (std::int64_t j = 0; j < visible; ++j) {
          const std::int64_t vrow = ((b * c.max_seq + j) * c.heads_kv + h / group) * c.head_dim;
          for (std::int64_t d = 0; d < c.head_dim; ++d)
            out[qrow + d] += s[static_cast<std::size_t>(j)] / sum * v[vrow + d];
        }
      }
  return out;
}

void run_case(const Case& c, std::uint64_t salt, int threads) {
  std::mt19937_64 rng(salt);
  const auto count = [](std::int64_t a, std::int64_t b, std::int64_t d, std::int64_t e) {
    return static_cast<std::size_t>(a * b * d * e);
  };
  const auto q = random_floats(count(c.batch, c.n_new, c.heads_q, c.head_dim), rng, 1.0f);
  const auto k = random_floats(count(c.batch, c.max_seq, c.heads_kv, c.head_dim), rng, 1.0f);
  const auto v = random_floats(count(c.batch, c.max_seq, c.heads_kv, c.head_dim), rng, 1.0f);
  std::vector<float> out(q.size(), std::nanf(""));
  const float scale = 1.5f / std::sqrt(static_cast<float>(c.head_dim));
  ThreadPool pool(threads);
  auto backend = make_cpu_attention(pool);
  AttentionBatch a;
  const auto view = [](const std::vector<float>& data, Shape shape) {
    return Tensor::view(const_cast<float*>(data.data()), DType::f32, Device::cpu(), std::move(shape));
  };
  a.q = view(q, {c.batch, c.n_new, c.heads_q, c.head_dim});
  a.k_cache = view(k, {c.batch, c.max_seq, c.heads_kv, c.head_dim});
  a.v_cache = view(v, {c.batch, c.max_seq, c.heads_kv, c.head_dim});
  a.out = view(out, {c.batch, c.n_new, c.heads_q, c.head_dim});
  a.kv_lengths = c.lengths;
  a.scale = scale;
  if (c.n_new == 1)
    backend->decode(a);
  else
    backend->prefill(a);
  const auto want = reference(c, q, k, v, scale);
  const double err = test::max_abs_error(out, want);  // infinite where out kept its NaN poison
  EXPECT_LT(err, 2e-5) << "batch " << c.batch << " n_new " << c.n_new << " heads " << c.heads_q << "/" << c.heads_kv;
}

TEST(CpuAttention, MatchesFp64Reference) {
  std::uint64_t salt = 100;
  for (int threads : {1, 2, 3}) {
    run_case({1, 1, 4, 2, 8, 16, {1}}, salt++, threads);                // decode of the first token
    run_case({1, 1, 9, 3, 64, 200, {150}}, salt++, threads);            // decode across key blocks
    run_case({1, 7, 4, 4, 6, 20, {7}}, salt++, threads);                // prefill from empty, MHA
    run_case({1, 5, 6, 1, 10, 160, {133}}, salt++, threads);            // prefill behind a cache, MQA
    run_case({2, 3, 4, 2, 4, 80, {3, 70}}, salt++, threads);            // two sequences of other lengths
    run_case({3, 1, 2, 2, 2, 9, {9, 1, 5}}, salt++, threads);           // a full cache
  }
}

TEST(CpuAttention, BadArguments) {
  ThreadPool pool(2);
  auto backend = make_cpu_attention(pool);
  std::vector<float> buf(4096);
  const auto view = [&](Shape shape, DType dtype = DType::f32) {
    return Tensor::view(buf.data(), dtype, Device::cpu(), std::move(shape));
  };
  const std::vector<std::int64_t> len = {4};
  AttentionBatch a;
  a.q = view({1, 2, 4, 8});
  a.k_cache = view({1, 16, 2, 8});
  a.v_cache = view({1, 16, 2, 8});
  a.out = view({1, 2, 4, 8});
  a.kv_lengths = len;
  AttentionBatch b = a;
  b.k_cache = view({1, 16, 3, 8});
  b.v_cache = b.k_cache;
  EXPECT_ERROR_CONTAINS(backend->prefill(b), "cpu attention prefill: heads_kv: expected a divisor of heads_q 4, got 3");
  b = a;
  b.v_cache = view({1, 15, 2, 8});
  EXPECT_ERROR_CONTAINS(backend->prefill(b), "v_cache.shape: expected [1, 16, 2, 8], got [1, 15, 2, 8]");
  b = a;
  b.out = view({1, 2, 4, 8}, DType::f16);
  EXPECT_ERROR_CONTAINS(backend->prefill(b), "out.dtype");
  const std::vector<std::int64_t> short_len = {1}, long_len = {17}, two = {4, 4};
  b = a;
  b.kv_lengths = short_len;
  EXPECT_ERROR_CONTAINS(backend->prefill(b), "kv_lengths: expected values in [n_new = 2, max_seq = 16], got 1");
  b.kv_lengths = long_len;
  EXPECT_ERROR_CONTAINS(backend->prefill(b), "got 17");
  b.kv_lengths = two;
  EXPECT_ERROR_CONTAINS(backend->prefill(b), "kv_lengths.size: expected 1, got 2");
  EXPECT_ERROR_CONTAINS(backend->decode(a), "cpu attention decode: q.shape[1]: expected 1, got 2");
  b = a;
  b.q = Tensor::view(buf.data(), DType::f32, Device::cpu(), {1, 2, 4, 8}, {64, 64, 8, 1});
  EXPECT_ERROR_CONTAINS(backend->prefill(b), "cpu attention prefill: q");
}

}  // namespace
}  // namespace ignis::engine
