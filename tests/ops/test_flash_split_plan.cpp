// How many ways the flash forward splits a tile's keys when asked to choose (src/cuda/ops/flash_split_plan.h):
// host arithmetic, so these run on any machine.
#include <gtest/gtest.h>

#include "cuda/ops/flash_split_plan.h"

namespace ignis::cuda {
namespace {

TEST(FlashSplitPlan, AGridThatFillsTheGpuIsNotSplit) {
  for (bool causal : {false, true}) {
    EXPECT_EQ(flash_auto_splits(396, 256, 396, causal), 1);
    EXPECT_EQ(flash_auto_splits(8192, 256, 396, causal), 1);
    EXPECT_EQ(flash_auto_splits(0, 256, 396, causal), 1);
  }
}

TEST(FlashSplitPlan, ASmallGridTakesTheSplitsOneWaveHolds) {
  // A 1024-token prompt of a 9-head model (8 tiles x 9 heads) on 132 SMs holding 2 blocks each: 3 splits
  // are one wave (216 of 264); a causal mask takes one more.
  EXPECT_EQ(flash_auto_splits(72, 16, 264, false), 3);
  EXPECT_EQ(flash_auto_splits(72, 16, 264, true), 4);
  // Half a wave: two splits fill it.
  EXPECT_EQ(flash_auto_splits(132, 64, 264, false), 2);
  EXPECT_EQ(flash_auto_splits(132, 64, 264, true), 3);
}

TEST(FlashSplitPlan, SplitsAreCountedInWholeWaves) {
  // 88 blocks on 132 SMs holding one each: 2 splits take two waves of half walks (no gain), 3 take two waves
  // of third walks, 4 three waves of quarter walks.
  EXPECT_EQ(flash_auto_splits(88, 64, 132, false), 3);
  EXPECT_EQ(flash_auto_splits(88, 64, 132, true), 4);
  // 198 of 264: 4 splits are exactly three waves of quarter walks.
  EXPECT_EQ(flash_auto_splits(198, 32, 264, false), 4);
  EXPECT_EQ(flash_auto_splits(198, 32, 264, true), 5);
  // Past three quarters of a wave, neither mask is split.
  EXPECT_EQ(flash_auto_splits(199, 32, 264, true), 1);
  EXPECT_EQ(flash_auto_splits(256, 32, 264, false), 1);
  EXPECT_EQ(flash_auto_splits(256, 32, 264, true), 1);
}

TEST(FlashSplitPlan, ShortWalksAreNotSplitAndChunksKeepFourKeyTiles) {
  EXPECT_EQ(flash_auto_splits(256, 8, 264, true), 1);  // a merge costs more than 8 tiles save
  EXPECT_EQ(flash_auto_splits(1, 15, 396, true), 1);
  EXPECT_EQ(flash_auto_splits(1, 16, 396, true), 4);
  EXPECT_EQ(flash_auto_splits(132, 16, 396, true), 4);
  EXPECT_EQ(flash_auto_splits(1, 47, 396, false), 11);
  EXPECT_EQ(flash_auto_splits(1, 4096, 396, true), static_cast<int>(kMaxAutoFlashSplits));
  EXPECT_LE(kMaxAutoFlashSplits, kMaxFlashSplits);
}

// The Hopper kernel's rule against the counts measured fastest on an H200 (132 resident blocks) in session 36's
// sweep (bench/bench_attention.py --splits 1,2,3,4,6,8; docs/BENCHMARKS.md "experiments of session 36", call 1).
// Units are 192-query tiles at head_dim 64, 128 at 128; key tiles hold 128 keys.
TEST(FlashSplitPlanByCost, PicksTheCountsMeasuredFastest) {
  EXPECT_EQ(flash_auto_splits_by_cost(54, 8, 132), 2);    // B1 S1024 H9 D64, both masks
  EXPECT_EQ(flash_auto_splits_by_cost(99, 16, 132), 1);   // B1 S2048 H9 D64: 4 splits, three waves, lost 24%
  EXPECT_EQ(flash_auto_splits_by_cost(96, 8, 132), 1);    // B1 S1024 H16 D64: 2 splits lost 30%
  EXPECT_EQ(flash_auto_splits_by_cost(64, 8, 132), 2);    // B1 S1024 H8 D128
  EXPECT_EQ(flash_auto_splits_by_cost(86, 64, 132), 3);   // B1 S8192 H2 D64, both masks
  EXPECT_EQ(flash_auto_splits_by_cost(128, 16, 132), 1);  // B1 S2048 H8 D128
  EXPECT_EQ(flash_auto_splits_by_cost(256, 128, 132), 1); // B1 S16384 H2 D128
  EXPECT_EQ(flash_auto_splits_by_cost(108, 8, 132), 1);   // B2 S1024 H9 D64
}

TEST(FlashSplitPlanByCost, OneUnitOfALongWalkTakesTheCap) {
  EXPECT_EQ(flash_auto_splits_by_cost(1, 32, 132), static_cast<int>(kMaxAutoFlashSplits));
  EXPECT_EQ(flash_auto_splits_by_cost(1, 4, 132), 1);  // four tiles: the merge costs more than the walk saves
}

TEST(FlashSplitPlanByCost, NothingToSplitIsOneSplit) {
  EXPECT_EQ(flash_auto_splits_by_cost(0, 64, 132), 1);
  EXPECT_EQ(flash_auto_splits_by_cost(10, 1, 132), 1);
  EXPECT_EQ(flash_auto_splits_by_cost(10, 64, 0), 1);
  EXPECT_EQ(flash_auto_splits_by_cost(100000, 256, 132), 1);
}

}  // namespace
}  // namespace ignis::cuda
