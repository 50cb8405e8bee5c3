// Reference transpose: hand values, batches, and transposing twice gives the input back.
#include <gtest/gtest.h>

#include "harness/op_harness.h"
#include "ref/transpose.h"

namespace ignis {
namespace {

TEST(RefTranspose, HandValues) {
  // [[1, 2, 3], [4, 5, 6]] -> [[1, 4], [2, 5], [3, 6]].
  EXPECT_EQ(ref::transpose(std::vector<double>{1, 2, 3, 4, 5, 6}, 1, 2, 3), (std::vector<double>{1, 4, 2, 5, 3, 6}));
  // A row vector becomes a column vector with the same memory.
  EXPECT_EQ(ref::transpose(std::vector<double>{1, 2, 3}, 1, 1, 3), (std::vector<double>{1, 2, 3}));
}

TEST(RefTranspose, Batched) {
  // Two 2 x 2 matrices, each transposed on its own.
  EXPECT_EQ(ref::transpose(std::vector<double>{1, 2, 3, 4, 5, 6, 7, 8}, 2, 2, 2),
            (std::vector<double>{1, 3, 2, 4, 5, 7, 6, 8}));
}

TEST(RefTranspose, TwiceIsIdentity) {
  auto rng = test::case_rng(21);
  const std::int64_t batch = 3, rows = 5, cols = 17;
  const auto x = test::random_normal(rng, batch * rows * cols);
  EXPECT_EQ(ref::transpose(ref::transpose(x, batch, rows, cols), batch, cols, rows), x);
}

}  // namespace
}  // namespace ignis
