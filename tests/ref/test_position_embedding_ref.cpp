// Reference position embedding: hand values, per-sequence starts, positions outside the table.
#include <gtest/gtest.h>

#include "ref/position_embedding.h"

namespace ignis {
namespace {

TEST(RefPositionEmbedding, HandValues) {
  // Two tokens from position 1 of a three-row table: rows 1 and 2 are added.
  const std::vector<double> x = {1, 2, 3, 4}, table = {10, 20, 30, 40, 50, 60};
  const std::vector<std::int64_t> starts = {1};
  EXPECT_EQ(ref::position_embedding_add(x, table, starts, 2, 2), (std::vector<double>{31, 42, 53, 64}));
}

TEST(RefPositionEmbedding, EachSequenceHasItsStart) {
  // Two sequences of one token, at positions 2 and 0.
  const std::vector<double> x = {0, 0, 1, 1}, table = {1, 2, 3, 4, 5, 6};
  const std::vector<std::int64_t> starts = {2, 0};
  EXPECT_EQ(ref::position_embedding_add(x, table, starts, 1, 2), (std::vector<double>{5, 6, 2, 3}));
}

TEST(RefPositionEmbedding, PositionsOutsideTheTableAddNothing) {
  const std::vector<double> x = {1, 2, 3}, table = {10, 20};
  const std::vector<std::int64_t> starts = {1};  // positions 1, 2, 3 of a two-row table
  EXPECT_EQ(ref::position_embedding_add(x, table, starts, 3, 1), (std::vector<double>{21, 2, 3}));
  const std::vector<std::int64_t> before = {-1};  // positions -1, 0, 1
  EXPECT_EQ(ref::position_embedding_add(x, table, before, 3, 1), (std::vector<double>{1, 12, 23}));
}

}  // namespace
}  // namespace ignis
