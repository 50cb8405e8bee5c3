// Reference GEMM: hand-derived products, alpha/beta, and identities (A @ I = A, NT = NN on B^T).
#include <gtest/gtest.h>

#include <cmath>
#include <limits>

#include "harness/op_harness.h"
#include "ref/gemm.h"
#include "ref/transpose.h"

namespace ignis {
namespace {

TEST(RefGemm, HandValues) {
  // [[1, 2], [3, 4]] @ [[5, 6], [7, 8]] = [[19, 22], [43, 50]].
  const std::vector<double> a = {1, 2, 3, 4}, b = {5, 6, 7, 8};
  EXPECT_EQ(ref::gemm_nn(a, b, {}, {1, 2, 2, 2}), (std::vector<double>{19, 22, 43, 50}));
  // B^T stored row per output column: [[5, 7], [6, 8]] as [n, k].
  EXPECT_EQ(ref::gemm_nt(a, std::vector<double>{5, 7, 6, 8}, {}, {1, 2, 2, 2}), (std::vector<double>{19, 22, 43, 50}));
  // Rectangular: [1, 2, 3] @ [[1], [0], [-1]] = [-2]; m = 1, n = 1, k = 3.
  EXPECT_EQ(ref::gemm_nn(std::vector<double>{1, 2, 3}, std::vector<double>{1, 0, -1}, {}, {1, 1, 1, 3}),
            (std::vector<double>{-2}));
}

TEST(RefGemm, AlphaBeta) {
  // 2 * [[19, 22], [43, 50]] - [[1, 2], [3, 4]].
  const std::vector<double> a = {1, 2, 3, 4}, b = {5, 6, 7, 8}, c = {1, 2, 3, 4};
  EXPECT_EQ(ref::gemm_nn(a, b, c, {1, 2, 2, 2}, 2.0, -1.0), (std::vector<double>{37, 42, 83, 96}));
  EXPECT_EQ(ref::gemm_nt(a, std::vector<double>{5, 7, 6, 8}, c, {1, 2, 2, 2}, 2.0, -1.0),
            (std::vector<double>{37, 42, 83, 96}));
}

TEST(RefGemm, BetaZeroDoesNotReadC) {
  const double nan = std::numeric_limits<double>::quiet_NaN();
  const auto out = ref::gemm_nn(std::vector<double>{2}, std::vector<double>{3}, std::vector<double>{nan}, {1, 1, 1, 1});
  EXPECT_EQ(out[0], 6.0);
}

TEST(RefGemm, BatchEntriesAreIndependent) {
  // Batch 0: [[1, 2], [3, 4]] @ I; batch 1: [[1, 2], [3, 4]] @ [[0, 1], [1, 0]] swaps columns.
  const std::vector<double> a = {1, 2, 3, 4, 1, 2, 3, 4};
  const std::vector<double> b = {1, 0, 0, 1, 0, 1, 1, 0};
  EXPECT_EQ(ref::gemm_nn(a, b, {}, {2, 2, 2, 2}), (std::vector<double>{1, 2, 3, 4, 2, 1, 4, 3}));
}

TEST(RefGemm, IdentityAndNtMatchesNnOnTransposedB) {
  auto rng = test::case_rng(11);
  const std::int64_t batch = 2, m = 5, n = 7, k = 3;
  const auto a = test::random_normal(rng, batch * m * k);
  std::vector<double> eye(batch * k * k, 0.0);
  for (std::int64_t z = 0; z < batch; ++z)
    for (std::int64_t i = 0; i < k; ++i) eye[(z * k + i) * k + i] = 1.0;
  EXPECT_EQ(ref::gemm_nn(a, eye, {}, {batch, m, k, k}), a);

  const auto b = test::random_normal(rng, batch * k * n);
  const auto nn = ref::gemm_nn(a, b, {}, {batch, m, n, k});
  const auto nt = ref::gemm_nt(a, ref::transpose(b, batch, k, n), {}, {batch, m, n, k});
  ASSERT_EQ(nn.size(), nt.size());
  for (std::size_t i = 0; i < nn.size(); ++i) EXPECT_NEAR(nn[i], nt[i], 1e-13);
  // (A B)^T = B^T A^T.
  const auto bt_at = ref::gemm_nn(ref::transpose(b, batch, k, n), ref::transpose(a, batch, m, k), {}, {batch, n, m, k});
  const auto nn_t = ref::transpose(nn, batch, m, n);
  for (std::size_t i = 0; i < nn.size(); ++i) EXPECT_NEAR(nn_t[i], bt_at[i], 1e-13);
}

}  // namespace
}  // namespace ignis
