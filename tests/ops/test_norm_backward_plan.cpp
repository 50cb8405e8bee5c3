// The norm backward's block shapes and schedules (src/cuda/ops/norm_backward_plan.h) for every row length up to
// past the longest staged row, both pack widths and both kinds of card: host arithmetic, so these
// run on any machine, while each GPU runs only its own card's plans.
#include <gtest/gtest.h>

#include <utility>
#include <vector>

#include "cuda/ops/norm_backward_plan.h"

namespace ignis::cuda::norm {
namespace {

// Rows of up to kMaxStagedCluster slices of kStageBytes / 32 packs fit; the step keeps the loop
// short while still landing on every power of two and its neighbours.
std::vector<long long> row_packs() {
  std::vector<long long> packs;
  for (long long p = 1; p <= 40000; p += p < 64 ? 1 : p / 16 + 1) packs.push_back(p);
  for (long long p = 2; p <= 32768; p *= 2)
    for (long long q : {p - 1, p, p + 1}) packs.push_back(q);
  return packs;
}

TEST(NormBackwardPlan, EveryStagedPlanCoversItsSliceWithinTheLimits) {
  const long long max_slice = kStageBytes / 32;  // 16 bytes each of x and dy a pack
  for (bool fast : {false, true})
    for (int v : {4, 8})
      for (long long packs : row_packs()) {
        SCOPED_TRACE(testing::Message() << "fast " << fast << " v " << v << " packs " << packs);
        const StagedPlan plan = plan_staged(packs * v, v, fast);
        if (plan.cluster == 0) {
          EXPECT_GT(packs, kMaxStagedCluster * max_slice) << "a row that fits was refused";
          continue;
        }
        const long long slice = (packs + plan.cluster - 1) / plan.cluster;
        EXPECT_LE(plan.cluster, kMaxStagedCluster);
        EXPECT_EQ(plan.cluster & (plan.cluster - 1), 0) << "cluster size not a power of two";
        EXPECT_LE(slice, max_slice);
        EXPECT_TRUE(plan.packs == 1 || plan.packs == 2 || plan.packs == 4) << plan.packs;
        EXPECT_EQ(plan.threads % 32, 0);
        EXPECT_LE(plan.threads, kStagedThreads);
        EXPECT_GE(static_cast<long long>(plan.threads) * plan.packs, slice) << "packs nobody owns";
        EXPECT_LT(static_cast<long long>(plan.threads - 32) * plan.packs, slice) << "a warp with nothing to do";
        EXPECT_EQ(plan.smem, kStages * slice * 32);
        // The smallest cluster whose slice fits: one cluster size smaller would not have.
        if (plan.cluster > 1) {
          const long long smaller = (packs + plan.cluster / 2 - 1) / (plan.cluster / 2);
          EXPECT_GT(smaller, max_slice);
        }
      }
}

// Fast-memory cards trade packs a thread for warps, never the other way, and only for slices of
// at least two packs for each of kStagedThreads threads; everywhere else both cards agree.
TEST(NormBackwardPlan, FastMemoryCardsTakeMoreWarpsOnlyForLongSlices) {
  for (int v : {4, 8})
    for (long long packs : row_packs()) {
      SCOPED_TRACE(testing::Message() << "v " << v << " packs " << packs);
      const StagedPlan slow = plan_staged(packs * v, v, false);
      const StagedPlan fast = plan_staged(packs * v, v, true);
      EXPECT_EQ(fast.cluster, slow.cluster);
      if (slow.cluster == 0) continue;
      const long long slice = (packs + slow.cluster - 1) / slow.cluster;
      EXPECT_GE(fast.threads, slow.threads);
      EXPECT_LE(fast.packs, slow.packs);
      if (slice < 2LL * kStagedThreads) {
        EXPECT_EQ(fast.threads, slow.threads);
        EXPECT_EQ(fast.packs, slow.packs);
      } else {
        // The fewest packs a thread (at least 2) that fit kStagedThreads threads.
        EXPECT_GE(fast.packs, 2);
        if (fast.packs == 4) EXPECT_GT(slice, 2LL * kStagedThreads) << "two packs a thread would have fit";
      }
    }
}

// The shapes the benchmark and PERF_NOTES name (session 13): bf16 8192 columns and f32 4096 take
// 256 threads of 4 packs on the H100 and 512 of 2 on the H200; bf16 4096 keeps 256 of 2 on both.
TEST(NormBackwardPlan, NamedShapesByCard) {
  const auto shape = [](long long dim, int v, bool fast) {
    const StagedPlan p = plan_staged(dim, v, fast);
    return std::make_pair(p.threads, p.packs);
  };
  EXPECT_EQ(shape(8192, 8, false), std::make_pair(256, 4));
  EXPECT_EQ(shape(8192, 8, true), std::make_pair(512, 2));
  EXPECT_EQ(shape(4096, 4, false), std::make_pair(256, 4));
  EXPECT_EQ(shape(4096, 4, true), std::make_pair(512, 2));
  EXPECT_EQ(shape(4096, 8, false), std::make_pair(256, 2));
  EXPECT_EQ(shape(4096, 8, true), std::make_pair(256, 2));
}

constexpr long long kHopperSmemRoom = 227 * 1024;  // cudaDevAttrMaxSharedMemoryPerBlockOptin on sm_90

// A benchmark cell's plan and schedule on a Hopper card (fast: the H200's bandwidth an SM).
struct PlannedRow {
  StagedPlan plan;
  StagedSchedule schedule;
};
PlannedRow planned(bool layer, int bytes, long long dim, bool fast) {
  const StagedPlan plan = plan_staged(dim, 16 / bytes, fast);
  return {plan, schedule_staged(plan, layer, bytes, dim, fast, kHopperSmemRoom)};
}

// Every schedule: two rows a step only for whole-row blocks of up to kPreferredStagedThreads threads
// whose one more stage fits; one group an SM only for whole rows that finish in the cooperative
// launch; and no 16-bit 2-pack block that takes two rows a step fills its stages with bulk copies
// (four stages and fills after the step's first barrier: no row in flight beyond the step).
TEST(NormBackwardPlan, EveryScheduleKeepsItsLimits) {
  for (bool fast : {false, true})
    for (bool layer : {false, true})
      for (int bytes : {2, 4})
        for (long long packs : row_packs()) {
          const int v = 16 / bytes;
          const long long dim = packs * v;
          SCOPED_TRACE(testing::Message() << "fast " << fast << " layer " << layer << " bytes " << bytes << " dim "
                                          << dim);
          const StagedPlan plan = plan_staged(dim, v, fast);
          if (plan.cluster == 0) continue;
          const StagedSchedule schedule = schedule_staged(plan, layer, bytes, dim, fast, kHopperSmemRoom);
          EXPECT_TRUE(schedule.rows_a_step == 1 || schedule.rows_a_step == 2);
          EXPECT_TRUE(schedule.groups_per_sm == 1 || schedule.groups_per_sm == 2);
          EXPECT_LE(schedule.smem + 1024, kHopperSmemRoom);
          // The kernel shifts a 16-byte aligned ring by up to kRingLine - 16 bytes onto a line, then past it.
          const int offset = ring_line_offset(layer, plan.packs, schedule.rows_a_step);
          EXPECT_EQ(offset % 16, 0);
          EXPECT_LT(offset, kRingLine);
          EXPECT_LE(kRingLine - 16 + offset, kRingRoom);
          if (schedule.rows_a_step == 2) {
            EXPECT_EQ(plan.cluster, 1);
            EXPECT_LE(plan.threads, kPreferredStagedThreads);
            EXPECT_EQ(schedule.smem, plan.smem / kStages * (kStages + 1) + kRingRoom);
            if (bytes == 2 && plan.packs == 2) EXPECT_FALSE(bulk_stage_fills(layer, bytes, plan.packs, 2));
          } else {
            EXPECT_EQ(schedule.smem, plan.smem + kRingRoom);
          }
          if (schedule.groups_per_sm == 1) {
            EXPECT_EQ(plan.cluster, 1);
            // RMSNorm's 16-bit 512-thread rows on fast-memory cards are the one-group-an-SM rows past the
            // cooperative finish.
            if (layer || bytes == 4 || !fast) EXPECT_LE(dim, kFinishColumns);
          }
        }
}

// The benchmark's 4096- and 8192-column cells by card (PERF_NOTES sessions 9-14 and 19): {rows a
// step, groups an SM, bulk fills}. RMSNorm's 16-bit 4096 takes LayerNorm's schedule only on the H100;
// its f32 4096 and 16-bit 8192 take one group an SM only on the H200.
TEST(NormBackwardPlan, NamedSchedulesByCard) {
  struct Expected {
    int rows_a_step, groups_per_sm;
    bool bulk;
    bool operator==(const Expected&) const = default;
  };
  const auto schedule = [](bool layer, int bytes, long long dim, bool fast) {
    const auto [plan, s] = planned(layer, bytes, dim, fast);
    return Expected{s.rows_a_step, s.groups_per_sm, bulk_stage_fills(layer, bytes, plan.packs, s.rows_a_step)};
  };
  // H100 (not fast-memory).
  EXPECT_EQ(schedule(true, 2, 4096, false), (Expected{2, 1, false}));
  EXPECT_EQ(schedule(false, 2, 4096, false), (Expected{2, 1, false}));
  EXPECT_EQ(schedule(true, 4, 4096, false), (Expected{1, 1, true}));
  EXPECT_EQ(schedule(false, 4, 4096, false), (Expected{2, 2, true}));
  EXPECT_EQ(schedule(true, 2, 8192, false), (Expected{2, 2, true}));
  EXPECT_EQ(schedule(false, 2, 8192, false), (Expected{2, 2, true}));
  // H200 (fast-memory).
  EXPECT_EQ(schedule(true, 2, 4096, true), (Expected{2, 1, false}));
  EXPECT_EQ(schedule(false, 2, 4096, true), (Expected{1, 2, true}));
  EXPECT_EQ(schedule(false, 4, 4096, true), (Expected{1, 1, true}));
  EXPECT_EQ(schedule(true, 2, 8192, true), (Expected{1, 2, false}));
  EXPECT_EQ(schedule(false, 2, 8192, true), (Expected{1, 1, true}));
}

// The ring's place past a 128-byte line: on the line, but for LayerNorm's 4-pack blocks of a row a
// step, named by the cells that lost there (PERF_NOTES session 18): H100 LayerNorm f32 4096, H200 bf16
// 16384; and the cells that gained: H100 16-bit 8192 (4 packs, two rows), H200 LayerNorm bf16 8192.
TEST(NormBackwardPlan, RingOnALineButForLayerNormFourPackRowAStep) {
  const auto offset = [](bool layer, int bytes, long long dim, bool fast) {
    const auto [plan, s] = planned(layer, bytes, dim, fast);
    return ring_line_offset(layer, plan.packs, s.rows_a_step);
  };
  EXPECT_EQ(offset(true, 4, 4096, false), 64);
  EXPECT_EQ(offset(true, 2, 16384, true), 64);
  EXPECT_EQ(offset(true, 2, 8192, false), 0);
  EXPECT_EQ(offset(false, 2, 8192, false), 0);
  EXPECT_EQ(offset(true, 2, 8192, true), 0);
}

// The cooperative finish's chunk width: the narrowest of 16, 32 and 64 columns whose chunks come to
// at most one a block, else 32. Named: the H100's 4096-column cells at 132 blocks (one group an SM)
// and 264 (two), PERF_NOTES sessions 14 and 15.
TEST(NormBackwardPlan, FinishChunksComeToOneABlockWherePossible) {
  const auto chunks = [](int sums, long long dim, int columns) { return sums * ((dim + columns - 1) / columns); };
  for (int sums : {1, 2})
    for (long long dim = 4; dim <= kFinishColumns; dim += dim < 256 ? 4 : 124)
      for (long long blocks : {1LL, 66LL, 132LL, 264LL, 528LL}) {
        SCOPED_TRACE(testing::Message() << "sums " << sums << " dim " << dim << " blocks " << blocks);
        const int columns = finish_chunk_columns(sums, dim, blocks);
        ASSERT_TRUE(columns == 16 || columns == 32 || columns == 64) << columns;
        if (chunks(sums, dim, 64) > blocks) {
          EXPECT_EQ(columns, 32) << "no width comes to one chunk a block";
          continue;
        }
        EXPECT_LE(chunks(sums, dim, columns), blocks);
        if (columns > 16) EXPECT_GT(chunks(sums, dim, columns / 2), blocks) << "a narrower width fits";
      }
  EXPECT_EQ(finish_chunk_columns(2, 4096, 132), 64);
  EXPECT_EQ(finish_chunk_columns(1, 4096, 132), 32);
  EXPECT_EQ(finish_chunk_columns(1, 4096, 264), 16);
  EXPECT_EQ(finish_chunk_columns(2, 4096, 264), 32);
}

// One group an SM keeps its block alone on the SM (PERF_NOTES session 19): more than half an SM's shared
// memory with what every block takes besides, so a second block cannot fit; one still does.
TEST(NormBackwardPlan, OneBlockAnSmLeavesNoRoomForASecond) {
  constexpr long long kHopperSm = 233472, kReserved = 1024;
  for (long long static_bytes : {0LL, 832LL, 1536LL, 3072LL})
    for (long long schedule_bytes : {0LL, 49408LL, 65792LL, 98560LL, 131328LL}) {
      SCOPED_TRACE(testing::Message() << "static " << static_bytes << " schedule " << schedule_bytes);
      const long long bytes = one_block_an_sm(schedule_bytes, kHopperSm, kReserved, static_bytes);
      EXPECT_GE(bytes, schedule_bytes);
      EXPECT_EQ(bytes % 16, 0);
      EXPECT_GT(2 * (bytes + kReserved + static_bytes), kHopperSm);
      EXPECT_LE(bytes + kReserved + static_bytes, kHopperSm);
    }
}

}  // namespace
}  // namespace ignis::cuda::norm
