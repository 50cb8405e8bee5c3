// How many ways the flash forward splits a tile's keys when asked to choose (src/cuda/ops/flash_split_plan.h):
// host arithmetic, so these run on any machine.
#include <gtest/gtest.h>

#include "cuda/ops/flash_split_plan.h"

namespace ignis::cuda {
namespace {

TEST(FlashSplitPlan, AGridThatFillsTheGpuIsNotSplit) {
  EXPECT_EQ(flash_auto_splits(528, 256, 528), 1);
  EXPECT_EQ(flash_auto_splits(8192, 256, 528), 1);
  EXPECT_EQ(flash_auto_splits(0, 256, 528), 1);
}

TEST(FlashSplitPlan, ASmallGridIsSplitUntilItFillsTheGpu) {
  // A 1024-token prompt of a 9-head model (16 tiles x 9 heads) on 132 SMs holding 4 blocks each.
  EXPECT_EQ(flash_auto_splits(144, 16, 528), 4);
  EXPECT_EQ(flash_auto_splits(264, 64, 528), 2);
  EXPECT_EQ(flash_auto_splits(263, 64, 528), 3);
}

TEST(FlashSplitPlan, EveryChunkKeepsTwoKeyTilesAndTheSplitsStayCapped) {
  EXPECT_EQ(flash_auto_splits(1, 3, 528), 1);  // three key tiles: no two chunks of two
  EXPECT_EQ(flash_auto_splits(1, 4, 528), 2);
  EXPECT_EQ(flash_auto_splits(1, 11, 528), 5);
  EXPECT_EQ(flash_auto_splits(1, 4096, 528), static_cast<int>(kMaxAutoFlashSplits));
  EXPECT_LE(kMaxAutoFlashSplits, kMaxFlashSplits);
}

}  // namespace
}  // namespace ignis::cuda
