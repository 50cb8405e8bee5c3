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

}  // namespace
}  // namespace ignis::cuda
