#include "cpu/gemm.h"

#include <algorithm>
#include <vector>

namespace ignis::cpu {
namespace {

// c, acc: [n], one row of C and its products.
void write_row(float* c, const float* acc, std::int64_t n, float alpha, float beta) {
  if (beta == 0.0f) {
    for (std::int64_t j = 0; j < n; ++j) c[j] = alpha * acc[j];
  } else {
    for (std::int64_t j = 0; j < n; ++j) c[j] = alpha * acc[j] + beta * c[j];
  }
}

// Runs fill_row(z, i, acc) for every row of C, which leaves the n products of row i of batch
// entry z in acc, then writes the row with alpha and beta.
// c: [batch, m, n].
template <class FillRow>
void for_each_row(float* c, std::int64_t batch, std::int64_t m, std::int64_t n, float alpha, float beta,
                  FillRow fill_row) {
  std::vector<float> acc(static_cast<std::size_t>(n));
  for (std::int64_t z = 0; z < batch; ++z)
    for (std::int64_t i = 0; i < m; ++i) {
      fill_row(z, i, acc.data());
      write_row(c + (z * m + i) * n, acc.data(), n, alpha, beta);
    }
}

}  // namespace

void gemm_nn_f32(const float* a, const float* b, float* c, std::int64_t batch, std::int64_t m, std::int64_t n,
                 std::int64_t k, float alpha, float beta) {
  // Row i of C accumulates a(i, p) * row p of B: every inner loop runs over contiguous memory.
  for_each_row(c, batch, m, n, alpha, beta, [&](std::int64_t z, std::int64_t i, float* acc) {
    const float* ai = a + (z * m + i) * k;
    std::fill(acc, acc + n, 0.0f);
    for (std::int64_t p = 0; p < k; ++p) {
      const float s = ai[p];
      const float* bp = b + (z * k + p) * n;
      for (std::int64_t j = 0; j < n; ++j) acc[j] += s * bp[j];
    }
  });
}

void gemm_nt_f32(const float* a, const float* b, float* c, std::int64_t batch, std::int64_t m, std::int64_t n,
                 std::int64_t k, float alpha, float beta) {
  // Each C(i, j) is a dot product of two contiguous rows.
  for_each_row(c, batch, m, n, alpha, beta, [&](std::int64_t z, std::int64_t i, float* acc) {
    const float* ai = a + (z * m + i) * k;
    for (std::int64_t j = 0; j < n; ++j) {
      const float* bj = b + (z * n + j) * k;
      float dot = 0.0f;
      for (std::int64_t p = 0; p < k; ++p) dot += ai[p] * bj[p];
      acc[j] = dot;
    }
  });
}

}  // namespace ignis::cpu
