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

// The Hopper kernel's candidates on an H200 (132 SMs, one block each): at head_dim 64, 192-row and 128-row units.
constexpr UnitShape kD64[2] = {{192, 1.0, 132}, {128, 0.767, 132}};
constexpr UnitShape kD128[1] = {{128, 1.0, 132}};

struct Measured {
  long long batch_heads, seqlen;
  bool causal;
  int rows, splits;  // the fastest measured
};

ScheduleProblem problem(const Measured& m) { return {m.batch_heads, m.seqlen, m.seqlen, m.causal, 128}; }

// The plans measured fastest on an H200 in session 36 (bench/bench_attention.py --splits 1,2,3,4 over both unit
// shapes at D 64, calls 1 and 2 of docs/BENCHMARKS.md "experiments of session 36"), where the model picks them.
// Three shapes it does not pick the fastest of (0.91-0.99x it) are left out: B1 S4096 H4 and H9 and B1 S8192 H2,
// causal, at D 64.
TEST(FlashSchedulePlan, PicksThePlansMeasuredFastest) {
  const Measured d64[] = {
      {9, 512, false, 128, 1},   {9, 512, true, 128, 1},    {9, 1024, false, 128, 1}, {9, 1024, true, 128, 1},
      {16, 1024, false, 128, 1}, {16, 1024, true, 128, 1},  {32, 1024, false, 128, 1}, {32, 1024, true, 128, 1},
      {9, 2048, false, 192, 1},  {9, 2048, true, 128, 1},   {16, 2048, false, 128, 1}, {16, 2048, true, 128, 1},
      {4, 4096, false, 128, 1},  {9, 4096, false, 192, 2},  {2, 8192, false, 128, 1},  {18, 1024, false, 192, 1},
      {18, 1024, true, 128, 1}};
  for (const Measured& m : d64) {
    const SchedulePlan plan = plan_schedule(problem(m), kD64, 2, 0);
    EXPECT_EQ(kD64[plan.shape].rows, m.rows) << m.batch_heads << " x " << m.seqlen << (m.causal ? " causal" : "");
    EXPECT_EQ(plan.splits, m.splits) << m.batch_heads << " x " << m.seqlen << (m.causal ? " causal" : "");
  }
  const Measured d128[] = {{8, 1024, false, 128, 2}, {8, 1024, true, 128, 2}, {8, 2048, false, 128, 1},
                           {8, 2048, true, 128, 1},  {4, 4096, false, 128, 1}, {2, 16384, false, 128, 1},
                           {2, 16384, true, 128, 1}};
  for (const Measured& m : d128)
    EXPECT_EQ(plan_schedule(problem(m), kD128, 1, 0).splits, m.splits) << m.batch_heads << " x " << m.seqlen;
}

TEST(FlashSchedulePlan, LargeGridsAreNotSplit) {
  for (bool causal : {false, true}) {
    EXPECT_EQ(plan_schedule({32 * 32, 512, 512, causal, 128}, kD64, 2, 0).splits, 1);
    EXPECT_EQ(plan_schedule({32, 16384, 16384, causal, 128}, kD64, 2, 0).splits, 1);
    EXPECT_EQ(plan_schedule({16 * 16, 4096, 4096, causal, 128}, kD128, 1, 0).splits, 1);
  }
  // Long sequences keep the 192-row units (each K and V tile shared by more rows); short causal ones take the
  // 128-row units, whose walks are more even (measured: B32 S512 H32 causal 185 against 172 TFLOP/s).
  EXPECT_EQ(kD64[plan_schedule({32, 16384, 16384, false, 128}, kD64, 2, 0).shape].rows, 192);
  EXPECT_EQ(kD64[plan_schedule({32 * 32, 512, 512, true, 128}, kD64, 2, 0).shape].rows, 128);
}

TEST(FlashSchedulePlan, OneQueryTileOfALongWalkTakesTheCap) {
  EXPECT_EQ(plan_schedule({1, 64, 4096, true, 128}, kD128, 1, 0).splits, static_cast<int>(kMaxAutoFlashSplits));
  EXPECT_EQ(plan_schedule({1, 64, 512, true, 128}, kD128, 1, 0).splits, 1);  // 4 tiles: a merge costs more
}

TEST(FlashSchedulePlan, AFixedSplitCountIsKeptAndTheShapeChosenForIt) {
  const SchedulePlan plan = plan_schedule({9, 1024, 1024, true, 128}, kD64, 2, 5);
  EXPECT_EQ(plan.splits, 5);
  EXPECT_EQ(plan_schedule({32, 16384, 16384, false, 128}, kD64, 2, 3).splits, 3);
}

TEST(FlashSchedulePlan, TheModelFollowsTheWalks) {
  // A causal tile walks only the keys its rows see: 8 query tiles of 128 over 1024 keys walk 1..8 tiles, so one
  // head's work is 36 tiles plus 8 units' costs, and all run at once: the time is the longest unit.
  const ScheduleProblem causal{1, 1024, 1024, true, 128};
  EXPECT_DOUBLE_EQ(modeled_schedule_time(causal, kD128[0], 1), 8 + kUnitCostInTiles);
  // Two splits of that longest walk take 4 tiles each, and the call pays the merge.
  EXPECT_DOUBLE_EQ(modeled_schedule_time(causal, kD128[0], 2), 4 + kUnitCostInTiles + kMergeCostInTiles);
  // 264 equal units on 132 slots: two rounds.
  const ScheduleProblem full{33, 1024, 1024, false, 128};
  EXPECT_DOUBLE_EQ(modeled_schedule_time(full, kD128[0], 1), 2 * (8 + kUnitCostInTiles));
  // Past four units a slot: the work over the slots plus one unit.
  const ScheduleProblem many{132, 1024, 1024, false, 128};
  EXPECT_DOUBLE_EQ(modeled_schedule_time(many, kD128[0], 1), 8 * (8 + kUnitCostInTiles) + 8 + kUnitCostInTiles);
}

TEST(FlashSchedulePlan, NothingToPlanIsOneSplitOfTheFirstShape) {
  for (const ScheduleProblem& p : {ScheduleProblem{0, 64, 64, false, 128}, ScheduleProblem{4, 0, 64, false, 128},
                                   ScheduleProblem{4, 64, 0, false, 128}, ScheduleProblem{4, 64, 64, false, 0}}) {
    const SchedulePlan plan = plan_schedule(p, kD64, 2, 0);
    EXPECT_EQ(plan.shape, 0);
    EXPECT_EQ(plan.splits, 1);
  }
  EXPECT_EQ(plan_schedule({4, 64, 64, false, 128}, kD64, 0, 0).splits, 1);
}

}  // namespace
}  // namespace ignis::cuda
